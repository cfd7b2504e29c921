/**
 * A wire-protocol double of EventStoreDB for tests: a real gRPC server built from the service
 * definitions and message classes that `@eventstore/db-client` itself ships, so the client talks
 * to it exactly as to a node. It implements ServerFeatures (listing BatchAppend), Streams.Append,
 * Streams.BatchAppend, and Streams.Read for stream reads, `$all` reads in both directions and
 * `$all` subscriptions (confirmation, catch-up, caught_up, checkpoints for filtered ones). Like a
 * node, it refuses an append over its maximum append size (default 1 MiB) on either append call.
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
  /** `$all` reads (not subscriptions) answered since the double started: the head asked for, pages read. */
  readonly readsOfAll: number;
  readonly port: number;
  readonly connectionString: string;
  /** Drops every connection and stops listening, as a node going down does. */
  stop(): Promise<void>;
  /** Listens again on the same port with the same data. */
  start(): Promise<void>;
  /** The next `count` BatchAppend requests are stored but never answered, as by a server that froze after writing. */
  leaveUnanswered(count: number): void;
  /** Stream reads send each event `ms` after the one before, as a busy server does. */
  paceReads(ms: number): void;
}

export async function startEventStoreDouble(): Promise<EventStoreDouble> {
  const store = new DoubleStore();
  let server: grpc.Server | undefined;
  let port = 0;
  const sent: SentCounts = { byAllReads: 0, allReads: 0, paceMs: 0 };
  const unanswered = { count: 0 };
  const double: EventStoreDouble = {
    store,
    get eventsSentByAllReads() {
      return sent.byAllReads;
    },
    get readsOfAll() {
      return sent.allReads;
    },
    get port() {
      return port;
    },
    get connectionString() {
      return `esdb://127.0.0.1:${port}?tls=false`;
    },
    leaveUnanswered(count) {
      unanswered.count = count;
    },
    paceReads(ms) {
      sent.paceMs = ms;
    },
    async stop() {
      server?.forceShutdown();
      server = undefined;
    },
    async start() {
      server = new grpc.Server();
      server.addService(featuresGrpc.ServerFeaturesService, { getSupportedMethods });
      server.addService(streamsGrpc.StreamsService, {
        append: (
          call: grpc.ServerReadableStream<InstanceType<typeof streamsPb.AppendReq>, unknown>,
          callback: grpc.sendUnaryData<unknown>,
        ) => append(store, call, callback),
        batchAppend: (call: grpc.ServerDuplexStream<InstanceType<typeof streamsPb.BatchAppendReq>, unknown>) =>
          batchAppend(store, call, unanswered),
        read: (call: grpc.ServerWritableStream<ReadRequest, ReadResponse>) => read(store, call, sent),
      });
      port = await new Promise<number>((resolve, reject) =>
        server!.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (error, bound) =>
          error ? reject(error) : resolve(bound),
        ),
      );
    },
  };
  await double.start();
  return double;
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
  unanswered: { count: number },
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
    if (unanswered.count > 0) {
      unanswered.count -= 1;
      return;
    }
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
  allReads: number;
  /** Between two events of a stream read. */
  paceMs: number;
}

function read(store: DoubleStore, call: grpc.ServerWritableStream<ReadRequest, ReadResponse>, sent: SentCounts): void {
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
    const stream = store.stream(name);
    if (!stream) {
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
    const selected = (backwards ? stream.slice(0, from + 1).reverse() : stream.slice(from)).slice(0, count);
    if (sent.paceMs === 0) {
      for (const event of selected) call.write(readEvent(event));
      return void call.end();
    }
    const sendFrom = (index: number): void => {
      if (index === selected.length) return void call.end();
      call.write(readEvent(selected[index]));
      setTimeout(() => sendFrom(index + 1), sent.paceMs);
    };
    return sendFrom(0);
  }

  const allOptions = options.getAll()!;
  const position = allOptions.hasPosition() ? BigInt(allOptions.getPosition()!.getCommitPosition()) : undefined;
  if (!options.hasSubscription()) {
    // Forwards from a position includes the event there; backwards from it, only those before.
    const events = backwards
      ? store.all
          .filter((event) => allOptions.hasEnd() || position === undefined || event.position < position)
          .reverse()
      : store.all.filter((event) => !allOptions.hasEnd() && (position === undefined || event.position >= position));
    for (const event of events.slice(0, count)) call.write(readEvent(event));
    sent.byAllReads += Math.min(count, events.length);
    sent.allReads += 1;
    return void call.end();
  }
  subscribeToAll(
    store,
    call,
    allOptions.hasEnd() ? (store.all.at(-1)?.position ?? -1n) : (position ?? -1n),
    filterOf(options),
  );
}

/** Catch-up from after `after`, then live. Filtered subscriptions get checkpoints as the server sends them. */
function subscribeToAll(
  store: DoubleStore,
  call: grpc.ServerWritableStream<ReadRequest, ReadResponse>,
  after: bigint,
  matches: Matcher | undefined,
): void {
  call.write(
    new ReadResp().setConfirmation(
      new ReadResp.SubscriptionConfirmation().setSubscriptionId(`double-${Math.random().toString(36).slice(2)}`),
    ),
  );
  let nextIndex = store.all.findIndex((event) => event.position > after);
  if (nextIndex === -1) nextIndex = store.all.length;
  const checkpoint = (position: bigint) =>
    call.write(
      new ReadResp().setCheckpoint(
        new ReadResp.Checkpoint().setCommitPosition(position.toString()).setPreparePosition(position.toString()),
      ),
    );

  const deliver = () => {
    if (call.cancelled || call.destroyed) return;
    const fresh = store.all.slice(nextIndex);
    nextIndex = store.all.length;
    for (const event of fresh) if (!matches || matches(event)) call.write(readEvent(event));
    if (matches && fresh.length > 0) checkpoint(fresh.at(-1)!.position);
  };
  deliver();
  call.write(new ReadResp().setCaughtUp(new ReadResp.CaughtUp()));
  const unsubscribe = store.onAppend(deliver);
  const stop = () => unsubscribe();
  call.on('cancelled', stop);
  call.on('close', stop);
  call.on('error', stop);
}
