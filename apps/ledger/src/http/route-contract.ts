import { z } from 'zod';

/**
 * A route's contract, kept beside its controller in its module's `*.contract.ts`: the same zod
 * schemas that validate the request, and schemas of what it answers. The OpenAPI document is
 * generated from these (http/openapi-document.ts); a test holds it to the live router.
 */
export interface RouteContract {
  readonly summary: string;
  readonly description?: string;
  /** The query string's fields (an object schema), as the route parses them. */
  readonly query?: z.ZodType;
  /** Request headers the route reads besides the credential. */
  readonly headers?: Readonly<Record<string, { readonly description: string; readonly schema: z.ZodType }>>;
  readonly body?: {
    readonly schema: z.ZodType;
    /** Media types the route reads; `application/json` unless told. */
    readonly mediaTypes?: readonly string[];
    /** `false`: the route takes no body too. */
    readonly required?: boolean;
  };
  /** Success answers by status; error answers are `{error: {code, message, field?}}` (see `errors`). */
  readonly responses: Readonly<Record<number, ResponseContract>>;
  /** Statuses of the refusals this route makes beyond every route's (400, 401, 403, 429), each with why. */
  readonly errors?: Readonly<Record<number, string>>;
  /** A Server-Sent Events route: its event types, each with its `data` (JSON). */
  readonly events?: Readonly<Record<string, { readonly description: string; readonly data: z.ZodType }>>;
}

export interface ResponseContract {
  readonly description: string;
  readonly schema?: z.ZodType;
  /** `application/json` unless told. */
  readonly mediaType?: string;
}

/** One module's routes: `METHOD /path` (Nest's path syntax, as identity/permissions.ts keys them) → contract. */
export type RouteContracts = Readonly<Record<string, RouteContract>>;

/** Every refusal's body. */
export const errorResponse = z.object({
  error: z.object({
    code: z.string().meta({ description: 'stable, machine-readable: `session_not_found`, `seq_gap`, …' }),
    message: z.string(),
    field: z.string().optional().meta({ description: 'the input at fault: a body path, a parameter or a header' }),
  }),
});

/** A log position in an answer: a JSON number. */
export const positionNumber = z.number().int().nonnegative().meta({ description: 'a log position' });

/** Objects read back as stored (metadata, tool arguments, provider payloads). */
export const jsonObject = z.record(z.string(), z.unknown());
