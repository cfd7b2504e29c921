/**
 * The injection token of the event-log port (EventLogModule binds it). On its own so that code outside Nest (the
 * command line) can import what injects it without loading the module, its metrics and its logger.
 */
export const EVENT_LOG = Symbol('EVENT_LOG');
