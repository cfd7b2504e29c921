import { Controller, Get, Inject, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import { ApiError } from '../http/api-error.js';
import { VerifiableLog } from './verifiable-log.js';

const count = (what: string) =>
  z
    .string()
    .regex(/^(0|[1-9][0-9]{0,17})$/, `must be ${what} (a whole number)`)
    .transform(BigInt);
export const checkpointQuery = z.object({ treeSize: count('a tree size').optional() });
export const inclusionQuery = z.object({
  position: count('a log position'),
  treeSize: count('a tree size').optional(),
});
export const consistencyQuery = z.object({ from: count('a tree size'), to: count('a tree size') });

/** Set on success only: an error answers in JSON like every other. */
function asText(response: FastifyReply, text: string): string {
  void response.type('text/plain; charset=utf-8');
  return text;
}

const base64 = (hashes: readonly Buffer[]) => hashes.map((hash) => hash.toString('base64'));

/**
 * The transparency log's routes (decision 0017): checkpoints as C2SP signed notes (text), the
 * verifier key, and RFC 9162 proofs (hashes in base64). Sizes and positions are decimal strings.
 */
@Controller('v1/log')
export class LogController {
  constructor(@Inject(VerifiableLog) private readonly log: VerifiableLog) {}

  @Get('checkpoint')
  async checkpoint(@Query() query: unknown, @Res({ passthrough: true }) response: FastifyReply): Promise<string> {
    const { treeSize } = checkpointQuery.parse(query);
    const checkpoint = await this.log.checkpoint(treeSize);
    if (!checkpoint)
      throw new ApiError(404, 'checkpoint_not_found', 'no checkpoint was signed at this tree size', 'treeSize');
    return asText(response, checkpoint.note);
  }

  @Get('key')
  key(@Res({ passthrough: true }) response: FastifyReply): string {
    return asText(response, `${this.log.key.verifierKey}\n`);
  }

  @Get('proof/inclusion')
  async inclusion(@Query() query: unknown) {
    const { position, treeSize: asked } = inclusionQuery.parse(query);
    const treeSize = asked ?? (await this.latestSize());
    await this.checkSize(treeSize, 'treeSize');
    const proof = (await this.log.inclusionProofs([position], treeSize)).get(position);
    if (!proof)
      throw new ApiError(
        404,
        'not_in_tree',
        `no event at this position is in the tree of ${treeSize} leaves`,
        'position',
      );
    return {
      position: String(position),
      leafIndex: String(proof.leafIndex),
      treeSize: String(treeSize),
      hashes: base64(proof.hashes),
    };
  }

  @Get('proof/consistency')
  async consistency(@Query() query: unknown) {
    const { from, to } = consistencyQuery.parse(query);
    if (from === 0n)
      throw new ApiError(400, 'invalid_request', 'from: every tree extends the empty one; ask from 1 on', 'from');
    if (to < from) throw new ApiError(400, 'invalid_request', 'to: must not be below from', 'to');
    await this.checkSize(to, 'to');
    return { from: String(from), to: String(to), hashes: base64(await this.log.consistencyProof(from, to)) };
  }

  private async latestSize(): Promise<bigint> {
    const latest = await this.log.checkpoint();
    if (!latest) throw new ApiError(404, 'checkpoint_not_found', 'no checkpoint is signed yet', 'treeSize');
    return latest.treeSize;
  }

  private async checkSize(size: bigint, field: string): Promise<void> {
    if (size === 0n)
      throw new ApiError(400, 'invalid_request', `${field}: the empty tree holds nothing to prove`, field);
    const current = await this.log.treeSize();
    if (size > current) throw new ApiError(422, 'beyond_tree', `${field}: the tree holds ${current} leaves`, field);
  }
}
