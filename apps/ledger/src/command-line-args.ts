import { parseArgs, type ParseArgsConfig } from 'node:util';

/** `parseArgs`, a refusal told in its first sentence, which names the flag (Node's message goes on about `--`). */
export function parseCommandLine<T extends ParseArgsConfig>(
  config: T,
  refusal: (message: string) => Error,
): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (error) {
    throw refusal((error as Error).message.split('. ')[0]);
  }
}
