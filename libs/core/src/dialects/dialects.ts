import { aiSdkUiTranslator } from './ai-sdk-ui.js';
import { anthropicMessagesTranslator } from './anthropic-messages.js';
import type { Translator } from './dialect.js';
import { openAiChatTranslator } from './openai-chat.js';
import { openAiResponsesTranslator } from './openai-responses.js';

/** The producer dialects the chunk route accepts besides Cherry chunks, by their `?dialect=` name. */
export const DIALECTS = {
  openai: openAiChatTranslator,
  'openai-responses': openAiResponsesTranslator,
  anthropic: anthropicMessagesTranslator,
  'ai-sdk': aiSdkUiTranslator,
} as const;

export type DialectName = keyof typeof DIALECTS;
export const DIALECT_NAMES = Object.keys(DIALECTS) as DialectName[];

export function isDialectName(name: string): name is DialectName {
  return Object.hasOwn(DIALECTS, name);
}

/** A dialect's translator, its state kept opaque where the dialect is chosen at run time. */
export function translatorOf(name: DialectName): Translator<unknown> {
  return DIALECTS[name];
}
