/**
 * Blocks in Cherry Studio's `MessageBlock` shape, so a Cherry-style client renders them as they
 * are. Only the fields each type uses are present.
 */
export type BlockStatus = 'pending' | 'processing' | 'streaming' | 'success' | 'error' | 'paused';
export type BlockType =
  | 'unknown'
  | 'main_text'
  | 'thinking'
  | 'translation'
  | 'image'
  | 'code'
  | 'tool'
  | 'file'
  | 'error'
  | 'citation'
  | 'video'
  | 'compact';
export type MessageStatus = 'processing' | 'success' | 'error' | 'paused';

export interface MessageBlock {
  readonly id: string;
  readonly messageId: string;
  readonly type: BlockType;
  readonly status: BlockStatus;
  readonly createdAt: string;
  readonly updatedAt?: string;
  /** main_text, thinking: the text; tool: the tool's result. */
  readonly content?: unknown;
  readonly thinking_millsec?: number;
  readonly toolId?: string;
  readonly toolName?: string;
  readonly arguments?: unknown;
  /** citation: the search response. */
  readonly response?: unknown;
  readonly url?: string;
  readonly error?: Readonly<Record<string, unknown>>;
  readonly metadata?: Readonly<Record<string, unknown>>;
}

export const OPEN_STATUSES: ReadonlySet<BlockStatus> = new Set(['pending', 'processing', 'streaming']);
