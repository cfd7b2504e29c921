/** The tables the block read-model projection owns (rebuilt and swapped together). */
export const BLOCK_READ_MODEL_TABLES = ['sessions', 'messages', 'message_blocks'] as const;
