import { readFileSync } from 'node:fs';
import { parseDocument, type YAMLError } from 'yaml';
import type { z } from 'zod';
import { StartupError } from '../database/embedded-postgres.js';

/**
 * A configuration file that stops the start: one line naming the variable, the file as the
 * variable gives it, and the problem. Never the file's content: such files hold keys, so a
 * syntax error is located by line and column, not quoted.
 */
export class ConfigFileError extends StartupError {
  constructor(variable: string, file: string, problem: string) {
    super(`${variable} (${file}): ${problem}`);
  }
}

const READ_PROBLEMS: Readonly<Record<string, string>> = {
  ENOENT: 'the file does not exist',
  EACCES: 'the file cannot be read (permission denied)',
  EISDIR: 'this is a folder, not a file',
  ENOTDIR: 'a part of the path is not a folder',
};

export function readConfigFile(variable: string, file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown error';
    throw new ConfigFileError(variable, file, READ_PROBLEMS[code] ?? `the file cannot be read (${code})`);
  }
}

/** YAML when the file is named `.yaml` or `.yml`, JSON otherwise. */
export function parseConfigFile(variable: string, file: string): unknown {
  const text = readConfigFile(variable, file);
  if (/\.ya?ml$/i.test(file)) {
    // A document, not `parse`, and errors only: warnings are printed on stderr (an unknown tag, a collection as a
    // key), quoting the text, a key with it.
    const document = parseDocument(text, { logLevel: 'error' });
    const [error] = document.errors;
    if (error) throw new ConfigFileError(variable, file, `not valid YAML${placeOf(error)}`);
    // A warning would leave a value other than the one written (a tag's text taken as a key): refused too.
    const [warning] = document.warnings;
    if (warning)
      throw new ConfigFileError(variable, file, `YAML this service does not read (${warning.code})${placeOf(warning)}`);
    try {
      return document.toJS();
    } catch {
      // An alias without its anchor (a value written `*…`), or more aliases than the bound: the error quotes it.
      throw new ConfigFileError(variable, file, 'not valid YAML (an alias this service does not read)');
    }
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ConfigFileError(variable, file, `not valid JSON${jsonErrorPlace(text, error as SyntaxError)}`);
  }
}

/** The file, parsed and checked by `schema`; the first problem names its field. */
export function loadConfigFile<Schema extends z.ZodType>(
  variable: string,
  file: string,
  schema: Schema,
): z.infer<Schema> {
  const parsed = schema.safeParse(parseConfigFile(variable, file));
  if (parsed.success) return parsed.data;
  throw new ConfigFileError(variable, file, describeIssue(parsed.error.issues[0], '(the whole file)'));
}

/**
 * A schema's refusal as `field: problem`. Unknown keys are quoted only when they could be a misspelt field name
 * (a word of at most 15 characters): a key written where a name belongs (`- sk-live-…:` for `- key: sk-live-…`) is a
 * field name to zod, whose message quotes it.
 */
export function describeIssue(issue: z.core.$ZodIssue, whole: string): string {
  const misspelt = (key: string) => /^[\w.$-]{1,15}$/.test(key);
  const problem =
    issue.code === 'unrecognized_keys' && !issue.keys.every(misspelt)
      ? 'an unrecognized key (not quoted: it may be a secret)'
      : issue.message;
  return `${issue.path.join('.') || whole}: ${problem}`;
}

/** Where a YAML problem is, by line and column. */
function placeOf(problem: YAMLError): string {
  const at = problem.linePos?.[0];
  return at ? ` (line ${at.line}, column ${at.col})` : '';
}

/** Where JSON.parse stopped, from the position its message gives (the message itself may quote the text). */
function jsonErrorPlace(text: string, error: SyntaxError): string {
  const position = /at position (\d+)/.exec(error.message)?.[1];
  if (position === undefined) return /end of JSON input/.test(error.message) ? ' (it ends too early)' : '';
  const before = text.slice(0, Number(position)).split('\n');
  return ` (line ${before.length}, column ${before.at(-1)!.length + 1})`;
}
