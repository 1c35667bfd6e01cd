// A full disk, said plainly: whatever failed with ENOSPC (a file write, git,
// qemu-img) becomes one named error (DiskFull) that names the folder and what
// can be freed, instead of a bare "ENOSPC: no space left on device, write".
import path from 'node:path';
import { FactoryError } from '../../common/contract.js';

const NO_SPACE = /ENOSPC|No space left on device/i;

/** DiskFull for an error caused by a full disk; undefined for any other error. */
export function diskFullError(err: unknown, dataDir?: string): FactoryError | undefined {
  if (err instanceof FactoryError && err.name === 'DiskFull') return err;
  const e = err as { code?: unknown; message?: unknown; path?: unknown; detail?: unknown } | undefined;
  const text = `${typeof e?.message === 'string' ? e.message : String(err)}\n${typeof e?.detail === 'string' ? e.detail : ''}`;
  if (e?.code !== 'ENOSPC' && !NO_SPACE.test(text)) return undefined;
  const where = typeof e?.path === 'string' ? path.dirname(e.path) : dataDir;
  const folder = where ? ` at ${where}` : '';
  const data = dataDir ? ` The app keeps sandboxes, terminal logs and task state in its data folder ${dataDir}:` : '';
  return new FactoryError(
    'DiskFull',
    `No space left on the disk${folder}.${data} free space on that disk (remove tasks you no longer need, which deletes their logs and sandboxes, or other files there), then try again.`,
    text.trim().slice(0, 2000),
  );
}
