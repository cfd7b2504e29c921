import type { MessageBlock } from '../../../../libs/core/src/blocks/message-block';
import { textOf } from './format';

/** A block as the read API sends it: the core's Cherry Studio `MessageBlock` (a type only; nothing of the core is bundled). */
export type Block = MessageBlock;

/** The read API's shapes the console renders (`GET /v1/sessions/:sid`). */
export interface Message {
  readonly id: string;
  readonly role: string;
  readonly parentId: string | null;
  readonly model: string | null;
  readonly content: string | null;
  readonly status: string;
  readonly createdAt: string;
  readonly position: number;
  readonly blocks: readonly Block[];
  readonly siblings?: { readonly ids: readonly string[]; readonly index: number; readonly count: number };
}

export interface Session {
  readonly id: string;
  readonly title: string | null;
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly createdAt: string;
  readonly forkedFrom: unknown;
  readonly position: number;
  readonly messages: readonly Message[];
}

/** A raw event of `GET /v1/sessions/:sid/events`. */
export interface RawEvent {
  readonly id: string;
  readonly type: string;
  readonly position: number;
  readonly revision: number;
  readonly data: unknown;
  readonly metadata: {
    readonly actor?: string;
    readonly hash?: string;
    readonly prevHash?: string;
    readonly recordedAt?: string;
  };
}

/** `GET /v1/sessions/:sid/tree`. */
export interface Tree {
  readonly roots: readonly string[];
  readonly messages: readonly {
    readonly id: string;
    readonly parentId: string | null;
    readonly children: readonly string[];
    readonly selectedChild: string | null;
  }[];
}

/** Wall-clock time from a message's creation to its last recorded block change. */
export function messageLatencyMs(message: Message): number | undefined {
  if (message.role !== 'assistant' || message.blocks.length === 0) return undefined;
  const last = Math.max(...message.blocks.map((block) => Date.parse(block.updatedAt ?? block.createdAt)));
  return Math.max(0, last - Date.parse(message.createdAt));
}

/** The text a message shows: its main text blocks, or its content. */
export const messageText = (message: Message) =>
  message.blocks
    .filter((block) => block.type === 'main_text')
    .map((block) => textOf(block.content))
    .join('\n') ||
  (message.content ?? '');
