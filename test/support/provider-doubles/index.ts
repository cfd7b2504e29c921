export { startProviderDouble, type Exchange, type ProviderDouble } from './provider-double.js';
export type {
  AnswerReply,
  DoubleRequest,
  Pacing,
  ProtocolName,
  RefusalReply,
  RefusalStatus,
  Reply,
  ReplyScript,
  SearchReply,
  ToolCallReply,
  UsageReply,
} from './core.js';
