import { Controller, Get, Inject, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { LEDGER_CONFIG, type LedgerConfig } from '../config/ledger-config.js';
import { ApiError } from '../http/api-error.js';
import { consoleContentSecurityPolicy, loadConsoleFiles, type ConsoleFile } from './console-files.js';

const APP_PAGE = 'index.html';

/**
 * The reviewer console (decision 0023): static files, no data, so public. Every path under
 * `/console` that names no built file is the app's page (the app routes in the browser), except a
 * path that looks like a file (`assets/…`, a name with an extension): that is a 404, so a missing
 * script never arrives as HTML.
 */
@Controller()
export class ConsoleController {
  private readonly files: ReadonlyMap<string, ConsoleFile>;
  private readonly contentSecurityPolicy: string;

  constructor(@Inject(LEDGER_CONFIG) private readonly config: LedgerConfig) {
    this.files = loadConsoleFiles(config.console.folder);
    this.contentSecurityPolicy = consoleContentSecurityPolicy(config.oidc?.issuer);
  }

  @Get('console')
  page(@Res() response: FastifyReply) {
    this.send(response, APP_PAGE);
  }

  /** Read off the raw path: the wildcard is no id, and only names of built files are looked up. */
  @Get('console/*')
  file(@Req() request: FastifyRequest, @Res() response: FastifyReply) {
    const name = request.url.split('?', 1)[0].slice('/console/'.length);
    const looksLikeFile = name.startsWith('assets/') || /\.[a-z0-9]+$/i.test(name);
    this.send(response, this.files.has(name) || !looksLikeFile ? name : undefined);
  }

  /** What the console needs to know before anyone signs in: how to reach the OpenID provider, if any. */
  @Get('v1/console/config')
  consoleConfig() {
    const { oidc, console } = this.config;
    return { oidc: oidc && console.oidcClientId ? { issuer: oidc.issuer, clientId: console.oidcClientId } : null };
  }

  private send(response: FastifyReply, name: string | undefined) {
    const file = name === undefined ? undefined : (this.files.get(name) ?? this.files.get(APP_PAGE));
    if (!file) {
      const what = this.files.size === 0 ? 'the console is not built (npm run build)' : 'no such console file';
      throw new ApiError(404, 'not_found', what);
    }
    void response
      .status(200)
      .headers({
        'content-type': file.contentType,
        'content-security-policy': this.contentSecurityPolicy,
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
        'cache-control': file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
      })
      .send(file.body);
  }
}
