import { Injectable, type ArgumentMetadata, type PipeTransform } from '@nestjs/common';
import { ApiError } from './api-error.js';

/**
 * What a client-chosen id may hold: never `/`, which separates a stream name's tenant from its id,
 * nor dots alone, which a URL's path resolves away (`/v1/sessions/..` is not that session's path).
 */
export const ID_CHARACTERS = /^(?!\.+$)[A-Za-z0-9._:-]+$/;
export const ID_MAX_LENGTH = 200;
export const ID_RULE = `letters, digits and . _ : - only, not dots alone, at most ${ID_MAX_LENGTH}`;

/**
 * Every id in a route's path (`:sid`, `:mid`, `:id`) must be one a client could have created.
 * The router decodes `%2F` in a path segment, and the default tenant's stream names have no tenant
 * part, so an unchecked `acme%2Fx` would name tenant acme's stream `session-acme/x`.
 */
@Injectable()
export class PathIdsPipe implements PipeTransform {
  transform(value: unknown, metadata: ArgumentMetadata): unknown {
    if (metadata.type !== 'param' || metadata.data === undefined) return value;
    if (typeof value === 'string' && value.length <= ID_MAX_LENGTH && ID_CHARACTERS.test(value)) return value;
    const field = metadata.data;
    throw new ApiError(400, 'invalid_request', `${field}: ${ID_RULE}`, field);
  }
}
