// The reaper's grace period: FACTORY_SESSION_GRACE_SEC (seconds), default 60.
import { FactoryError } from '../../common/contract.js';

export const DEFAULT_SESSION_GRACE_MS = 60_000;

export function sessionGraceMs(env: NodeJS.ProcessEnv): number {
  const raw = env.FACTORY_SESSION_GRACE_SEC;
  if (raw === undefined || raw === '') return DEFAULT_SESSION_GRACE_MS;
  const sec = Number(raw);
  if (!Number.isFinite(sec) || sec < 0 || sec > 86_400) {
    throw new FactoryError('InvalidInput', `FACTORY_SESSION_GRACE_SEC: not a number of seconds from 0 to 86400: ${JSON.stringify(raw)}`);
  }
  return Math.round(sec * 1000);
}
