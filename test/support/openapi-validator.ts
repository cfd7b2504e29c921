import { spawn } from 'node:child_process';

/**
 * Validates an OpenAPI document with @apidevtools/swagger-parser in a plain Node process: the
 * parser loads its ESM dependencies with `require`, which Jest's module loader cannot do.
 * Resolves with the validator's error message, or `undefined` when the document is valid.
 */
export function openApiProblems(document: unknown): Promise<string | undefined> {
  const script = `
    import SwaggerParser from '@apidevtools/swagger-parser';
    let text = '';
    for await (const part of process.stdin) text += part;
    try { await SwaggerParser.validate(JSON.parse(text)); process.stdout.write('valid'); }
    catch (error) { process.stdout.write(error.message); }`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.on('data', (part: Buffer) => (output += part.toString()));
  child.stdin.end(JSON.stringify(document));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', () => resolve(output === 'valid' ? undefined : output || 'the validator said nothing'));
  });
}
