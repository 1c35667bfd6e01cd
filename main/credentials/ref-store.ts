// The app's own record of credentials: references only (id, kind, label,
// target). Never a value. One JSON file, written atomically (temp + rename) so
// a crash leaves either the old or the new file, never half of one.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { CredentialRef } from '../../common/credentials.js';
import { FactoryError } from '../../common/errors.js';
import { writeFileAtomic } from '../state/state-store.js';

const FileShape = z.object({ version: z.literal(1), credentials: z.array(CredentialRef) });

export class CredentialRefStore {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly file: string) {}

  async list(): Promise<CredentialRef[]> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const parsed = FileShape.safeParse(JSON.parse(text));
    if (!parsed.success) {
      throw new FactoryError('CorruptState', `credential references in ${path.basename(this.file)} are invalid: ${parsed.error.issues[0]?.message}`);
    }
    return parsed.data.credentials;
  }

  async get(id: string): Promise<CredentialRef | undefined> {
    return (await this.list()).find((c) => c.id === id);
  }

  /** Serialised read-modify-write, so concurrent callers never lose an update. */
  update(fn: (refs: CredentialRef[]) => CredentialRef[]): Promise<CredentialRef[]> {
    const next = this.queue.then(async () => {
      const refs = fn(await this.list());
      await writeAtomic(this.file, JSON.stringify({ version: 1, credentials: refs }, null, 2) + '\n');
      return refs;
    });
    // The queue only orders writes; the caller gets this write's failure from `next`.
    this.queue = next.catch(() => undefined);
    return next;
  }
}

/**
 * Temp file (0600, unique per write) + fsync + rename: the state store's writer,
 * so two writes of one record at once both land and a failed one leaves no temp file.
 */
export function writeAtomic(file: string, content: string): Promise<void> {
  return writeFileAtomic(file, content);
}
