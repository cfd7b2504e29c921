import { z } from 'zod';
import { PERMISSIONS } from '../identity/permissions.js';
import { ID_CHARACTERS, ID_MAX_LENGTH } from './path-ids.pipe.js';
import { errorResponse, type RouteContract, type RouteContracts } from './route-contract.js';

type JsonSchema = Record<string, unknown>;
export type OpenApiDocument = Record<string, unknown> & { readonly paths: Record<string, Record<string, unknown>> };

const ERROR_REF = { $ref: '#/components/schemas/Error' };

/** Refusals any route with a credential can make (identity/, http/). */
const CREDENTIAL_ERRORS: Readonly<Record<number, string>> = {
  401: 'no valid credential (`WWW-Authenticate: Bearer`)',
  403: "the credential's roles may not call this route, or it may not write here",
  429: 'the credential is over its rate (`Retry-After`)',
};
const INPUT_ERROR = 'bad input: the field at fault is named (`error.field`); nothing was changed';

const DOCS_PAGE = { summary: 'Swagger UI', responses: { 200: { description: 'the page', mediaType: 'text/html' } } };

/** The document's own routes (api-docs.ts serves them). */
export const DOCS_CONTRACT: RouteContracts = {
  'GET /docs': { ...DOCS_PAGE, summary: 'Swagger UI (also at `/docs/`)' },
  'GET /docs/index.html': DOCS_PAGE,
  'GET /docs/swagger-ui-init.js': {
    summary: "The Swagger UI's start script, holding this document",
    responses: { 200: { description: 'the script', mediaType: 'text/javascript' } },
  },
  'GET /docs/*': {
    summary: "The Swagger UI's script, styles and icons",
    responses: { 200: { description: 'the file: text/javascript, text/css or image/png', mediaType: '*/*' } },
    errors: { 404: 'no file the page loads has this name' },
  },
  'GET /docs/openapi.json': {
    summary: 'This document',
    responses: { 200: { description: 'OpenAPI 3.1', schema: z.looseObject({ openapi: z.string() }) } },
  },
  'GET /docs-yaml': {
    summary: 'This document as YAML',
    responses: { 200: { description: 'OpenAPI 3.1', mediaType: 'text/yaml', schema: z.string() } },
  },
};

/**
 * The OpenAPI 3.1 document, generated from the routes' contracts: request schemas are the zod
 * schemas the routes validate with (JSON Schema draft 2020-12, OpenAPI 3.1's dialect), who may
 * call each route comes from the permission table.
 */
export function openApiDocument(modules: readonly RouteContracts[]): OpenApiDocument {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [route, contract] of modules.flatMap((routes) => Object.entries(routes))) {
    const [method, nestPath] = route.split(' ');
    const path = nestPath.replace(/:(\w+)/g, '{$1}');
    (paths[path] ??= {})[method.toLowerCase()] = operation(route, nestPath, contract);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Block Ledger',
      version: '1',
      description:
        'Immutable ledger of LLM agent sessions. Errors are `{error: {code, message, field?}}`; positions are ' +
        'log positions (JSON numbers). A position beyond the log head is `422 position_beyond_head` naming the ' +
        'parameter (`?minPosition` first waits up to 5 s). Any route may answer 503 when the database cannot serve: ' +
        '`database_busy`, `database_unavailable` or `database_timeout` with `Retry-After` (nothing was done), or ' +
        '`database_connection_lost` (a write may have been stored: retry with the same ids, or read first). ' +
        'Quickstart: docs/quickstart.md.',
    },
    security: [{ bearer: [] }, { apiKey: [] }],
    paths,
    components: {
      schemas: { Error: jsonSchema(errorResponse) },
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'an API key `blk_…` (POST /v1/admin/keys) or a JWT from the configured OpenID provider',
        },
        apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'an API key `blk_…`' },
      },
    },
  };
}

function operation(route: string, nestPath: string, contract: RouteContract): Record<string, unknown> {
  const rule = PERMISSIONS[route];
  const isPublic = rule === 'public';
  const roles = rule === undefined ? 'not in the permission table' : isPublic ? 'public' : rule.join(', ');
  const parameters = [
    ...[...nestPath.matchAll(/:(\w+)/g)].map(([, name]) => ({
      name,
      in: 'path',
      required: true,
      schema: { type: 'string', pattern: ID_CHARACTERS.source, maxLength: ID_MAX_LENGTH },
    })),
    ...queryParameters(contract.query),
    ...Object.entries(contract.headers ?? {}).map(([name, { description, schema }]) => ({
      name,
      in: 'header',
      required: false,
      description,
      schema: jsonSchema(schema),
    })),
  ];
  const takesInput = contract.query !== undefined || contract.body !== undefined || parameters.length > 0;
  const errors: Record<number, string> = { ...(isPublic ? undefined : CREDENTIAL_ERRORS), ...contract.errors };
  if (takesInput) errors[400] = INPUT_ERROR;
  return {
    operationId: operationId(route),
    summary: contract.summary,
    description: [contract.description, `Roles: ${roles}.`].filter(Boolean).join('\n\n'),
    tags: [nestPath.split('/').filter((part) => part !== '' && part !== 'v1')[0]],
    ...(isPublic ? { security: [] } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(contract.body
      ? {
          requestBody: {
            required: contract.body.required ?? true,
            content: Object.fromEntries(
              (contract.body.mediaTypes ?? ['application/json']).map((type) => [
                type,
                { schema: jsonSchema(contract.body!.schema) },
              ]),
            ),
          },
        }
      : {}),
    responses: {
      ...Object.fromEntries(
        Object.entries(contract.responses).map(([status, response]) => [
          status,
          {
            description: response.description,
            content: contract.events
              ? { 'text/event-stream': { schema: sseSchema(contract.events) } }
              : {
                  [response.mediaType ?? 'application/json']: {
                    schema: response.schema ? jsonSchema(response.schema) : {},
                  },
                },
          },
        ]),
      ),
      ...Object.fromEntries(
        Object.entries(errors).map(([status, description]) => [
          status,
          { description, content: { 'application/json': { schema: ERROR_REF } } },
        ]),
      ),
    },
  };
}

/** Unique per route: `POST /v1/sessions/:sid/messages` → `postSessionsSidMessages`. */
function operationId(route: string): string {
  const [method, path] = route.split(' ');
  const words = path
    .split(/[^A-Za-z0-9*]+/)
    .filter((word) => word !== '' && word !== 'v1')
    // `/docs/*` beside `/docs`: a wildcard names the folder's files.
    .map((word) => (word === '*' ? 'Files' : word[0].toUpperCase() + word.slice(1)));
  // `/docs/` beside `/docs`: a trailing slash names the folder's index.
  return method.toLowerCase() + words.join('') + (path.endsWith('/') ? 'Index' : '');
}

/** Each field of the query's object schema as a query parameter. */
function queryParameters(query: z.ZodType | undefined) {
  if (!query) return [];
  const schema = jsonSchema(query) as { properties?: Record<string, JsonSchema>; required?: string[] };
  return Object.entries(schema.properties ?? {}).map(([name, property]) => ({
    name,
    in: 'query',
    required: schema.required?.includes(name) ?? false,
    ...(typeof property.description === 'string' ? { description: property.description } : {}),
    schema: property,
  }));
}

/** An event stream's frames: each event type with its JSON `data`; `id` is the log position. */
function sseSchema(events: NonNullable<RouteContract['events']>): JsonSchema {
  return {
    type: 'string',
    description:
      'Server-Sent Events; `id:` is the log position to resume from (`Last-Event-ID`), `: heartbeat` comments keep it open.',
    'x-events': Object.fromEntries(
      Object.entries(events).map(([name, { description, data }]) => [name, { description, data: jsonSchema(data) }]),
    ),
  };
}

/**
 * A request schema as JSON Schema, read as its input: a body wrapped in `storableJson` (any JSON,
 * checked storable, then piped into the real schema) is described by that real schema. A schema whose metadata
 * names its type is described by it, not by the forms it parses (a position: a JSON number, or decimal digits in a
 * query string).
 */
function jsonSchema(schema: z.ZodType): JsonSchema {
  const described = schema instanceof z.ZodPipe && schema.in instanceof z.ZodUnknown ? schema.out : schema;
  const json = z.toJSONSchema(described as z.ZodType, {
    io: 'input',
    unrepresentable: 'any',
    override: ({ jsonSchema: node }) => {
      if (node.type !== undefined && node.anyOf !== undefined) delete node.anyOf;
    },
  }) as JsonSchema;
  delete json.$schema;
  return json;
}
