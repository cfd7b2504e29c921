/**
 * Per-credential request budget: a token bucket holding `limit` requests, refilled at `limit`
 * per `windowMs`, so a credential may burst to its limit and then keeps the average. Buckets of
 * credentials idle for a whole window are dropped (a full bucket is the same as none).
 */
export class CredentialRateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private lastSweep = 0;

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
  ) {}

  /** Takes one request from the credential's budget: 0 when allowed, else the milliseconds until one is. */
  take(credentialId: string, now = Date.now()): number {
    this.sweep(now);
    const bucket = this.buckets.get(credentialId) ?? { tokens: this.limit, at: now };
    bucket.tokens = Math.min(this.limit, bucket.tokens + ((now - bucket.at) * this.limit) / this.windowMs);
    bucket.at = now;
    this.buckets.set(credentialId, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - bucket.tokens) * this.windowMs) / this.limit);
  }

  private sweep(now: number): void {
    if (now - this.lastSweep < this.windowMs) return;
    this.lastSweep = now;
    for (const [credentialId, bucket] of this.buckets)
      if (now - bucket.at >= this.windowMs) this.buckets.delete(credentialId);
  }
}
