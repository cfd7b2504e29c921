/**
 * A wire-protocol double of EventStoreDB for tests: a real gRPC server built from the service
 * definitions and message classes that `@eventstore/db-client` itself ships, so the client talks
 * to it exactly as to a node. It implements ServerFeatures (listing BatchAppend), Streams.Append,
 * Streams.BatchAppend, and Streams.Read for stream reads, `$all` reads in both directions and
 * `$all` subscriptions (confirmation, catch-up, caught_up, checkpoints for filtered ones). Like a
 * node, it refuses an append over its maximum append size (default 1 MiB) on either append call.
 * `startFollower` adds a second node: a follower that forwards appends, answers reads from what it
 * has replicated, and refuses a call that requires the leader by naming the leader, as a cluster does.
 * Never part of the app.
 */
import grpc from '@grpc/grpc-js';
import featuresGrpc from '@eventstore/db-client/generated/serverfeatures_grpc_pb.js';
import featuresPb from '@eventstore/db-client/generated/serverfeatures_pb.js';
import sharedPb from '@eventstore/db-client/generated/shared_pb.js';
import statusPb from '@eventstore/db-client/generated/status_pb.js';
import codePb from '@eventstore/db-client/generated/code_pb.js';
import streamsGrpc from '@eventstore/db-client/generated/streams_grpc_pb.js';
import streamsPb from '@eventstore/db-client/generated/streams_pb.js';
import anyPb from 'google-protobuf/google/protobuf/any_pb.js';
import emptyPb from 'google-protobuf/google/protobuf/empty_pb.js';
import { DoubleStore, type Expected, type ProposedEvent, type StoredEvent } from './double-store.js';

export { DEFAULT_MAX_APPEND_SIZE } from './double-store.js';

const { ReadReq, ReadResp, AppendResp, BatchAppendResp } = streamsPb;
type ReadRequest = InstanceType<typeof ReadReq>;
type ReadResponse = InstanceType<typeof ReadResp>;

export interface EventStoreDouble {
  readonly store: DoubleStore;
  /** Events sent by `$all` reads (not subscriptions) since the double started: what readers asked the server for. */
  readonly eventsSentByAllReads: number;
  readonly port: number;
  readonly connectionString: string;
  /** Drops every connection and stops listening, as a node going down does. */
  stop(): Promise<void>;
  /** Listens again on the same port with the same data. */
  start(): Promise<void>;
  /** A follower of this node, on a port of its own. */
  startFollower(): Promise<FollowerDouble>;
}

/** A follower node: appends go to its leader's log; reads see what it replicated. */
export interface FollowerDouble {
  readonly connectionString: string;
  /** Calls refused since it started because they require the leader (each refusal names the leader). */
  readonly refusedAsNotLeader: number;
  /**
   * Replicates nothing more: reads and subscriptions see the log as it is now, as on a node cut off from the leader
   * or left behind by an election. Appends still reach the leader.
   */
  stopReplication(): void;
  stop(): Promise<void>;
}

/** What one node of the double serves, and how. */
interface Node {
  readonly store: DoubleStore;
  readonly sent: SentCounts;
  /** The events reads and subscriptions see: the log's first ones, up to what the node has replicated. */
  visible(events: readonly StoredEvent[]): readonly StoredEvent[];
  /** A follower's leader; a call that requires the leader is refused with its address. */
  readonly leaderPort?: number;
  refused(): void;
}

export async function startEventStoreDouble(): Promise<EventStoreDouble> {
  const store = new DoubleStore();
  let server: grpc.Server | undefined;
  let port = 0;
  const sent: SentCounts = { byAllReads: 0 };
  const node: Node = { store, sent, visible: (events) => events, refused: () => undefined };
  const double: EventStoreDouble = {
    store,
    get eventsSentByAllReads() {
      return sent.byAllReads;
    },
    get port() {
      return port;
    },
    get connectionString() {
      return `esdb://127.0.0.1:${port}?tls=false`;
    },
    async stop() {
      server?.forceShutdown();
      server = undefined;
    },
    async start() {
      server = serve(node);
      port = await listen(server, port);
    },
    async startFollower() {
      let replicatedTo: bigint | undefined;
      let refusedAsNotLeader = 0;
      const follower = serve({
        store,
        sent: { byAllReads: 0 },
        visible: (events) =>
          replicatedTo === undefined ? events : events.filter(({ position }) => position <= replicatedTo!),
        leaderPort: port,
        refused: () => (refusedAsNotLeader += 1),
      });
      const followerPort = await listen(follower, 0);
      return {
        connectionString: `esdb://127.0.0.1:${followerPort}?tls=false`,
        get refusedAsNotLeader() {
          return refusedAsNotLeader;
        },
        stopReplication() {
          replicatedTo ??= store.all.at(-1)?.position ?? -1n;
        },
        async stop() {
          follower.forceShutdown();
        },
      };
    },
  };
  await double.start();
  return double;
}

function serve(node: Node): grpc.Server {
  const server = new grpc.Server();
  server.addService(featuresGrpc.ServerFeaturesService, { getSupportedMethods });
  server.addService(streamsGrpc.StreamsService, {
    append: (
      call: grpc.ServerReadableStream<InstanceType<typeof streamsPb.AppendReq>, unknown>,
      callback: grpc.sendUnaryData<unknown>,
    ) => (refusedAsNotLeader(node, call) ? callback(notLeader(node)) : append(node.store, call, callback)),
    batchAppend: (call: grpc.ServerDuplexStream<InstanceType<typeof streamsPb.BatchAppendReq>, unknown>) =>
      refusedAsNotLeader(node, call) ? call.emit('error', notLeader(node)) : batchAppend(node.store, call),
    read: (call: grpc.ServerWritableStream<ReadRequest, ReadResponse>) =>
      refusedAsNotLeader(node, call) ? call.emit('error', notLeader(node)) : read(node, call),
  });
  return server;
}

function listen(server: grpc.Server, port: number): Promise<number> {
  return new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
}

/** A follower asked for something only the leader may answer (the client's `requiresLeader`). */
function refusedAsNotLeader(node: Node, call: { metadata: grpc.Metadata }): boolean {
  if (node.leaderPort === undefined || call.metadata.get('requires-leader')[0] !== 'true') return false;
  node.refused();
  return true;
}

/** As a follower answers such a call: the exception and the leader's address in the trailers. */
function notLeader(node: Node): Error & grpc.ServiceError {
  const metadata = new grpc.Metadata();
  metadata.set('exception', 'not-leader');
  metadata.set('leader-endpoint-host', '127.0.0.1');
  metadata.set('leader-endpoint-port', String(node.leaderPort));
  return Object.assign(new Error('Leader info available'), {
    code: grpc.status.NOT_FOUND,
    details: 'Leader info available',
    metadata,
  });
}

function getSupportedMethods(_call: unknown, callback: grpc.sendUnaryData<unknown>): void {
  const methods = [
    ['event_store.client.streams.streams', 'append'],
    ['event_store.client.streams.streams', 'batchappend'],
    ['event_store.client.streams.streams', 'read'],
  ].map(([service, method]) => new featuresPb.SupportedMethod().setServiceName(service).setMethodName(method));
  callback(
    null,
    new featuresPb.SupportedMethods().setMethodsList(methods).setEventStoreServerVersion('24.10.0-double'),
  );
}

// ---- appends ----------------------------------------------------------------------------------

const streamNameOf = (identifier: { getStreamName_asU8(): Uint8Array } | undefined) =>
  Buffer.from(identifier!.getStreamName_asU8()).toString('utf8');

function proposedEvent(message: InstanceType<typeof streamsPb.AppendReq.ProposedMessage>): ProposedEvent {
  const metadata = message.getMetadataMap();
  return {
    id: message.getId()!.getString(),
    type: metadata.get('type') ?? '',
    contentType: metadata.get('content-type') ?? 'application/octet-stream',
    data: message.getData_asU8(),
    customMetadata: message.getCustomMetadata_asU8(),
  };
}

function append(
  store: DoubleStore,
  call: grpc.ServerReadableStream<InstanceType<typeof streamsPb.AppendReq>, unknown>,
  callback: grpc.sendUnaryData<unknown>,
): void {
  let streamName = '';
  let expected: Expected = { kind: 'any' };
  const proposed: ProposedEvent[] = [];
  call.on('data', (request: InstanceType<typeof streamsPb.AppendReq>) => {
    if (request.hasOptions()) {
      const options = request.getOptions()!;
      streamName = streamNameOf(options.getStreamIdentifier());
      expected = options.hasRevision()
        ? { kind: 'revision', revision: BigInt(options.getRevision()) }
        : options.hasNoStream()
          ? { kind: 'no_stream' }
          : options.hasStreamExists()
            ? { kind: 'stream_exists' }
            : { kind: 'any' };
    } else {
      proposed.push(proposedEvent(request.getProposedMessage()!));
    }
  });
  call.on('end', () => {
    const outcome = store.append(streamName, expected, proposed);
    if (!outcome.ok && outcome.refused === 'maximum_append_size_exceeded') {
      // As the server does on this call: an RPC error whose trailers name the exception.
      const metadata = new grpc.Metadata();
      metadata.set('exception', 'maximum-append-size-exceeded');
      metadata.set('maximum-append-size', String(outcome.maxAppendSize));
      const details = `Maximum Append Size of ${outcome.maxAppendSize} Exceeded.`;
      return void callback({ code: grpc.status.INVALID_ARGUMENT, details, metadata });
    }
    const response = new AppendResp();
    if (outcome.ok) {
      const position = new AppendResp.Position()
        .setCommitPosition(outcome.position.toString())
        .setPreparePosition(outcome.position.toString());
      response.setSuccess(
        new AppendResp.Success().setCurrentRevision(outcome.currentRevision.toString()).setPosition(position),
      );
    } else {
      const wrong = new AppendResp.WrongExpectedVersion();
      if (outcome.current === 'no_stream') wrong.setCurrentNoStream(new sharedPb.Empty());
      else wrong.setCurrentRevision(outcome.current.toString());
      if (outcome.expected.kind === 'revision') wrong.setExpectedRevision(outcome.expected.revision.toString());
      else if (outcome.expected.kind === 'no_stream') wrong.setExpectedNoStream(new sharedPb.Empty());
      else if (outcome.expected.kind === 'stream_exists') wrong.setExpectedStreamExists(new sharedPb.Empty());
      else wrong.setExpectedAny(new sharedPb.Empty());
      response.setWrongExpectedVersion(wrong);
    }
    callback(null, response);
  });
}

function batchAppend(
  store: DoubleStore,
  call: grpc.ServerDuplexStream<InstanceType<typeof streamsPb.BatchAppendReq>, unknown>,
): void {
  const pending = new Map<
    string,
    {
      streamName: string;
      expected: Expected;
      events: ProposedEvent[];
      options: InstanceType<typeof streamsPb.BatchAppendReq.Options>;
    }
  >();
  call.on('data', (request: InstanceType<typeof streamsPb.BatchAppendReq>) => {
    const correlation = request.getCorrelationId()!;
    const key = correlation.getString();
    if (request.hasOptions()) {
      const options = request.getOptions()!;
      const expected: Expected = options.hasStreamPosition()
        ? { kind: 'revision', revision: BigInt(options.getStreamPosition()) }
        : options.hasNoStream()
          ? { kind: 'no_stream' }
          : options.hasStreamExists()
            ? { kind: 'stream_exists' }
            : { kind: 'any' };
      pending.set(key, { streamName: streamNameOf(options.getStreamIdentifier()), expected, events: [], options });
    }
    const entry = pending.get(key)!;
    entry.events.push(...request.getProposedMessagesList().map((message) => proposedEvent(message as never)));
    if (!request.getIsFinal()) return;
    pending.delete(key);

    const outcome = store.append(entry.streamName, entry.expected, entry.events);
    const response = new BatchAppendResp()
      .setCorrelationId(correlation)
      .setStreamIdentifier(entry.options.getStreamIdentifier());
    if (entry.expected.kind === 'revision') response.setStreamPosition(entry.expected.revision.toString());
    else if (entry.expected.kind === 'no_stream') response.setNoStream(new emptyPb.Empty());
    else if (entry.expected.kind === 'stream_exists') response.setStreamExists(new emptyPb.Empty());
    else response.setAny(new emptyPb.Empty());
    if (!outcome.ok && outcome.refused === 'maximum_append_size_exceeded') {
      const details = new anyPb.Any();
      const exceeded = new sharedPb.MaximumAppendSizeExceeded().setMaxappendsize(outcome.maxAppendSize);
      details.pack(exceeded.serializeBinary(), 'event_store.client.MaximumAppendSizeExceeded');
      const status = new statusPb.Status().setCode(codePb.Code.INVALID_ARGUMENT);
      status.setMessage('MaximumAppendSizeExceeded');
      response.setError(status.setDetails(details));
    } else if (outcome.ok) {
      const position = new sharedPb.AllStreamPosition()
        .setCommitPosition(outcome.position.toString())
        .setPreparePosition(outcome.position.toString());
      response.setSuccess(
        new BatchAppendResp.Success().setCurrentRevision(outcome.currentRevision.toString()).setPosition(position),
      );
    } else {
      // As the server does: the mismatch travels in the response body as a google.rpc.Status.
      const wrong = new sharedPb.WrongExpectedVersion();
      if (outcome.current === 'no_stream') wrong.setCurrentNoStream(new emptyPb.Empty());
      else wrong.setCurrentStreamRevision(outcome.current.toString());
      if (outcome.expected.kind === 'revision') wrong.setExpectedStreamPosition(outcome.expected.revision.toString());
      else if (outcome.expected.kind === 'no_stream') wrong.setExpectedNoStream(new emptyPb.Empty());
      else if (outcome.expected.kind === 'stream_exists') wrong.setExpectedStreamExists(new emptyPb.Empty());
      else wrong.setExpectedAny(new emptyPb.Empty());
      const details = new anyPb.Any();
      details.pack(wrong.serializeBinary(), 'event_store.client.WrongExpectedVersion');
      response.setError(
        new statusPb.Status()
          .setCode(codePb.Code.FAILED_PRECONDITION)
          .setMessage('WrongExpectedVersion')
          .setDetails(details),
      );
    }
    call.write(response);
  });
  call.on('end', () => call.end());
}

// ---- reads and subscriptions -----------------------------------------------------------------

function readEvent(event: StoredEvent): ReadResponse {
  const recorded = new ReadResp.ReadEvent.RecordedEvent()
    .setId(new sharedPb.UUID().setString(event.id))
    .setStreamIdentifier(new sharedPb.StreamIdentifier().setStreamName(Buffer.from(event.streamName, 'utf8')))
    .setStreamRevision(event.revision.toString())
    .setPreparePosition(event.position.toString())
    .setCommitPosition(event.position.toString())
    .setData(event.data)
    .setCustomMetadata(event.customMetadata);
  recorded
    .getMetadataMap()
    .set('type', event.type)
    .set('content-type', event.contentType)
    .set('created', event.created.toString());
  return new ReadResp().setEvent(
    new ReadResp.ReadEvent().setEvent(recorded).setCommitPosition(event.position.toString()),
  );
}

type Matcher = (event: StoredEvent) => boolean;

function filterOf(options: InstanceType<typeof ReadReq.Options>): Matcher | undefined {
  if (!options.hasFilter()) return undefined;
  const filter = options.getFilter()!;
  const onStream = filter.hasStreamIdentifier();
  const expression = onStream ? filter.getStreamIdentifier()! : filter.getEventType()!;
  const prefixes = expression.getPrefixList();
  const regex = expression.getRegex() ? new RegExp(expression.getRegex()) : undefined;
  return (event) => {
    const subject = onStream ? event.streamName : event.type;
    return (
      (prefixes.length === 0 || prefixes.some((prefix) => subject.startsWith(prefix))) &&
      (!regex || regex.test(subject))
    );
  };
}

interface SentCounts {
  byAllReads: number;
}

function read(node: Node, call: grpc.ServerWritableStream<ReadRequest, ReadResponse>): void {
  const { sent } = node;
  const all = node.visible(node.store.all);
  const options = call.request.getOptions()!;
  const backwards = options.getReadDirection() === ReadReq.Options.ReadDirection.BACKWARDS;
  const count = options.hasCount() ? Number(BigInt(options.getCount())) : Number.MAX_SAFE_INTEGER;

  if (options.hasStream()) {
    const streamOptions = options.getStream()!;
    const name = streamNameOf(streamOptions.getStreamIdentifier());
    // A server stream ends with an error status when the error is emitted (`destroy` would never send it).
    if (options.hasSubscription())
      return void call.emit(
        'error',
        Object.assign(new Error('stream subscriptions are not implemented by the double'), {
          code: grpc.status.UNIMPLEMENTED,
        }),
      );
    const stored = node.store.stream(name);
    const stream = stored && node.visible(stored);
    if (!stream?.length) {
      call.write(
        new ReadResp().setStreamNotFound(
          new ReadResp.StreamNotFound().setStreamIdentifier(streamOptions.getStreamIdentifier()),
        ),
      );
      return void call.end();
    }
    const from = streamOptions.hasRevision()
      ? Number(BigInt(streamOptions.getRevision()))
      : streamOptions.hasEnd()
        ? stream.length - 1
        : backwards
          ? stream.length - 1
          : 0;
    const selected = backwards ? stream.slice(0, from + 1).reverse() : stream.slice(from);
    for (const event of selected.slice(0, count)) call.write(readEvent(event));
    return void call.end();
  }

  const allOptions = options.getAll()!;
  const position = allOptions.hasPosition() ? BigInt(allOptions.getPosition()!.getCommitPosition()) : undefined;
  if (!options.hasSubscription()) {
    // Forwards from a position includes the event there; backwards from it, only those before.
    const events = backwards
      ? all.filter((event) => allOptions.hasEnd() || position === undefined || event.position < position).reverse()
      : all.filter((event) => !allOptions.hasEnd() && (position === undefined || event.position >= position));
    for (const event of events.slice(0, count)) call.write(readEvent(event));
    sent.byAllReads += Math.min(count, events.length);
    return void call.end();
  }
  subscribeToAll(
    node,
    call,
    allOptions.hasEnd() ? (all.at(-1)?.position ?? -1n) : (position ?? -1n),
    filterOf(options),
  );
}

/** Catch-up from after `after`, then live. Filtered subscriptions get checkpoints as the server sends them. */
function subscribeToAll(
  node: Node,
  call: grpc.ServerWritableStream<ReadRequest, ReadResponse>,
  after: bigint,
  matches: Matcher | undefined,
): void {
  call.write(
    new ReadResp().setConfirmation(
      new ReadResp.SubscriptionConfirmation().setSubscriptionId(`double-${Math.random().toString(36).slice(2)}`),
    ),
  );
  let nextIndex = node.visible(node.store.all).findIndex((event) => event.position > after);
  if (nextIndex === -1) nextIndex = node.visible(node.store.all).length;
  const checkpoint = (position: bigint) =>
    call.write(
      new ReadResp().setCheckpoint(
        new ReadResp.Checkpoint().setCommitPosition(position.toString()).setPreparePosition(position.toString()),
      ),
    );

  const deliver = () => {
    if (call.cancelled || call.destroyed) return;
    const visible = node.visible(node.store.all);
    const fresh = visible.slice(nextIndex);
    nextIndex = visible.length;
    for (const event of fresh) if (!matches || matches(event)) call.write(readEvent(event));
    if (matches && fresh.length > 0) checkpoint(fresh.at(-1)!.position);
  };
  deliver();
  call.write(new ReadResp().setCaughtUp(new ReadResp.CaughtUp()));
  const unsubscribe = node.store.onAppend(deliver);
  const stop = () => unsubscribe();
  call.on('cancelled', stop);
  call.on('close', stop);
  call.on('error', stop);
}
