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
  /** main_text: the citation blocks it cites (Cherry's `citationReferences`). */
  readonly citationReferences?: readonly CitationReference[];
  /** file, image attached to a user message: the file as Cherry's `FileMetadata` describes it. */
  readonly file?: AttachedFile;
  /** translation: the languages, and the block translated when one was named. */
  readonly targetLanguage?: string;
  readonly sourceLanguage?: string;
  readonly sourceBlockId?: string;
  readonly error?: Readonly<Record<string, unknown>>;
  readonly metadata?: Readonly<Record<string, unknown>>;
}

/** Where a main_text block's citations are: the citation block, and its source (`websearch`, `knowledge`, a provider). */
export interface CitationReference {
  readonly citationBlockId: string;
  readonly citationBlockSource?: string;
}

/**
 * A file attached by reference, in Cherry's `FileMetadata` shape (`path` holds the URL: the
 * ledger never has a local copy), plus what the reference names: its media type, digest and URL.
 */
export interface AttachedFile {
  readonly id: string;
  readonly name: string;
  readonly origin_name: string;
  readonly path: string;
  readonly size: number;
  readonly ext: string;
  readonly type: 'image' | 'video' | 'audio' | 'text' | 'document' | 'other';
  readonly created_at: string;
  readonly count: number;
  readonly mimeType: string;
  readonly sha256: string;
  readonly url: string;
}

export const OPEN_STATUSES: ReadonlySet<BlockStatus> = new Set(['pending', 'processing', 'streaming']);
