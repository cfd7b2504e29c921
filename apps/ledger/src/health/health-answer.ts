/** How long each health check may take: a probe that waits on an unreachable part answers down, not never. */
export const HEALTH_ANSWER_MS = 1_000;
