import { createContext, useContext } from 'react';

/** `GET /v1/me`: who the credential is, as the ledger records it. */
export interface Me {
  readonly actor: string;
  readonly subject: string;
  readonly tenant: string;
  readonly roles: readonly string[];
}

export const MeContext = createContext<Me | undefined>(undefined);

/** Which of the console's actions the roles allow, as the service's permission table says. */
export function useAbilities() {
  const me = useContext(MeContext);
  const has = (...roles: string[]) => roles.some((role) => me?.roles.includes(role));
  return {
    me,
    /** Select branches (the PUT selection routes). */
    write: has('producer'),
    /** The approval queue, approve and deny. */
    review: has('reviewer'),
    /** Tool-call trails. */
    oversee: has('reviewer', 'auditor'),
    /** Raw events, verify, export, checkpoints. */
    audit: has('auditor'),
  };
}
