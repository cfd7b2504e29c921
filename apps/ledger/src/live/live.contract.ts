import { z } from 'zod';
import { jsonObject, positionNumber, type RouteContracts } from '../http/route-contract.js';
import { eventsLiveQuery, sessionLiveQuery } from './live.controller.js';

const lastEventId = {
  'Last-Event-ID': {
    description: 'resume after this position (sent by the feed as `id:`); `?from=` does the same',
    schema: z.string().regex(/^\d+$/),
  },
};
const overflow = {
  description: 'the client left too much untaken: it is cut off and resumes from `resumeFrom`',
  data: z.object({ reason: z.string(), resumeFrom: positionNumber.nullable() }),
};
const credentialEnded = {
  description:
    'the credential was revoked, expired or no longer admits the feed: the feed ends; resume from `resumeFrom` with a valid one',
  data: z.object({ reason: z.string(), resumeFrom: positionNumber.nullable() }),
};
const LIVE_ERRORS = {
  422: '`from` or `Last-Event-ID` beyond the log head (`position_beyond_head`)',
  503: 'this instance has not reached the resume point within 5 s; retry',
};

export const LIVE_CONTRACT: RouteContracts = {
  'GET /v1/sessions/:sid/live': {
    summary: "Live feed of the session's read-model changes",
    description:
      'No resume point: the whole session first. `id:` is the log position, on the last update of each position.',
    query: sessionLiveQuery,
    headers: lastEventId,
    responses: { 200: { description: 'an event stream' } },
    events: {
      message: { description: 'a message as a read returns it, without blocks', data: jsonObject },
      block: {
        description: 'a block as a read returns it, plus `messageId` and `index`; `removed: true` when it left',
        data: jsonObject,
      },
      selection: { description: 'a branch selected', data: jsonObject },
      toolcall: { description: "a governed call's record, each time it moves", data: jsonObject },
      overflow,
      credential_ended: credentialEnded,
    },
    errors: { 404: 'no such session', 429: 'too many open feeds for this credential', ...LIVE_ERRORS },
  },
  'GET /v1/events/live': {
    summary: 'Live feed of raw events',
    description: 'Filtered by comma-separated type and stream prefixes; starts at the head without a resume point.',
    query: eventsLiveQuery,
    headers: lastEventId,
    responses: { 200: { description: 'an event stream' } },
    events: {
      message: { description: 'a recorded event as `/events` returns it (no `event:` line)', data: jsonObject },
      overflow,
      credential_ended: credentialEnded,
    },
    errors: { 429: 'too many open feeds for this credential', ...LIVE_ERRORS },
  },
};
