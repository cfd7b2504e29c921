/**
 * The injection token of the plain pg pool (DatabaseModule binds it). On its own so that code outside Nest (the
 * command line) can import what injects it without loading the module and its logger.
 */
export const PG_POOL = Symbol('PG_POOL');
