import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/** One built file of the console, read once at startup. */
export interface ConsoleFile {
  readonly body: Buffer;
  readonly contentType: string;
  /** Vite names assets by their content's hash: they never change under their name. */
  readonly immutable: boolean;
}

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
};

/**
 * The console's build output as a map of `relative/path` → file. Only files listed here are ever
 * served: a request names a key of this map or gets the app's page, so no path a client sends
 * reaches the file system. Missing folder = an empty map (the console was not built).
 */
export function loadConsoleFiles(folder: string): ReadonlyMap<string, ConsoleFile> {
  const files = new Map<string, ConsoleFile>();
  const walk = (relative: string) => {
    let names: string[];
    try {
      names = readdirSync(path.join(folder, relative));
    } catch {
      return;
    }
    for (const name of names) {
      const child = relative ? `${relative}/${name}` : name;
      const absolute = path.join(folder, child);
      if (statSync(absolute).isDirectory()) {
        walk(child);
        continue;
      }
      const contentType = CONTENT_TYPES[path.extname(name)];
      if (!contentType) continue;
      files.set(child, { body: readFileSync(absolute), contentType, immutable: child.startsWith('assets/') });
    }
  };
  walk('');
  return files;
}

/**
 * The console's Content-Security-Policy: its own scripts and styles only, API calls to its own
 * origin (and the OpenID provider's, which the sign-in talks to), no framing, images from itself
 * or inline data (a recorded image URL elsewhere is not fetched: a reviewer's browser should not
 * call out to whatever a session names).
 */
export function consoleContentSecurityPolicy(oidcIssuer: string | undefined): string {
  const provider = oidcIssuer ? ` ${new URL(oidcIssuer).origin}` : '';
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    `connect-src 'self'${provider}`,
    `form-action 'self'${provider}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "object-src 'none'",
  ].join('; ');
}
