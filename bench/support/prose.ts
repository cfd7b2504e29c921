/** Text of words, different at every offset, so that PostgreSQL's compression sees prose rather than one letter. */
export function prose(bytes: number, seed: number): string {
  const words = ['ledger', 'block', 'stream', 'tool', 'answer', 'model', 'event', 'chunk', 'session', 'audit'];
  let text = '';
  for (let index = seed; text.length < bytes; index += 7) text += `${words[index % words.length]}${index % 97} `;
  return text.slice(0, bytes);
}
