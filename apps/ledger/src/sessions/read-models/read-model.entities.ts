import type { ForkSource } from '#core';
import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * Read-model rows (schema: 1763800000002-block-read-models, 1763800000003-branch-trees, 1763800000005-identity).
 * The projection writes them; queries read them.
 */
@Entity('sessions')
export class SessionRow {
  @PrimaryColumn('text') tenant!: string;
  @PrimaryColumn('text') id!: string;
  @Column('text', { nullable: true }) title!: string | null;
  @Column('jsonb') metadata!: Record<string, unknown>;
  @Column('timestamptz', { name: 'created_at' }) createdAt!: Date;
  @Column('text', { name: 'selected_root_id', nullable: true }) selectedRootId!: string | null;
  @Column('jsonb', { name: 'forked_from', nullable: true }) forkedFrom!: ForkSource | null;
  @Column('bigint') position!: string;
}

@Entity('messages')
export class MessageRow {
  @PrimaryColumn('text') tenant!: string;
  @PrimaryColumn('text', { name: 'session_id' }) sessionId!: string;
  @PrimaryColumn('text') id!: string;
  @Column('integer') ordinal!: number;
  @Column('text') role!: string;
  @Column('text', { name: 'parent_id', nullable: true }) parentId!: string | null;
  @Column('text', { name: 'selected_child_id', nullable: true }) selectedChildId!: string | null;
  @Column('text', { nullable: true }) model!: string | null;
  @Column('text', { nullable: true }) content!: string | null;
  @Column('text') status!: string;
  @Column('integer', { name: 'last_seq' }) lastSeq!: number;
  @Column('timestamptz', { name: 'created_at' }) createdAt!: Date;
  @Column('bigint') position!: string;
}

@Entity('message_blocks')
export class MessageBlockRow {
  @PrimaryColumn('text') tenant!: string;
  @PrimaryColumn('text', { name: 'session_id' }) sessionId!: string;
  @PrimaryColumn('text') id!: string;
  @Column('text', { name: 'message_id' }) messageId!: string;
  @Column('integer') index!: number;
  @Column('text') type!: string;
  @Column('text') status!: string;
  @Column('jsonb', { nullable: true }) content!: unknown;
  @Column('text', { name: 'tool_id', nullable: true }) toolId!: string | null;
  @Column('text', { name: 'tool_name', nullable: true }) toolName!: string | null;
  @Column('jsonb', { nullable: true }) arguments!: unknown;
  @Column('jsonb', { name: 'tool_response', nullable: true }) toolResponse!: unknown;
  @Column('jsonb', { nullable: true }) metadata!: Record<string, unknown> | null;
  @Column('jsonb', { nullable: true }) error!: Record<string, unknown> | null;
  /** Type-specific fields with no column of their own (url, response, thinking_millsec). */
  @Column('jsonb') extra!: Record<string, unknown>;
  @Column('timestamptz', { name: 'created_at' }) createdAt!: Date;
  @Column('timestamptz', { name: 'updated_at', nullable: true }) updatedAt!: Date | null;
  @Column('bigint') position!: string;
}

export const READ_MODEL_ENTITIES = [SessionRow, MessageRow, MessageBlockRow];
