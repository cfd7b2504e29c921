/**
 * The EventStoreDB adapter, loaded only where a connection string names a server: its gRPC client
 * takes about a tenth of a second of every start-up that does not use it.
 */
export const eventStoreDb = () => import('#event-log/eventstoredb');
