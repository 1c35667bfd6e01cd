// Audit log of every request the proxies handled: one JSON-lines file per
// sandbox in the data dir, appended as requests end, queryable per sandbox.
import { appendFile, mkdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { AuditEntry } from '../../common/credentials.js';
import { FactoryError } from '../../common/errors.js';
import { Listeners } from '../../common/listeners.js';

const SANDBOX_ID = /^[A-Za-z0-9._-]{1,128}$/;

export class AuditLog {
  private readonly listeners = new Listeners<AuditEntry>();
  private writes: Promise<void> = Promise.resolve();
  /** Bytes per sandbox file, learned on first write; a guest must not fill the host's disk. */
  private readonly sizes = new Map<string, number>();
  private readonly maxBytes: number;

  constructor(
    private readonly dir: string,
    opts: { maxBytesPerSandbox?: number } = {},
  ) {
    this.maxBytes = opts.maxBytesPerSandbox ?? 64 * 1024 * 1024;
  }

  record(entry: AuditEntry): void {
    const file = this.fileFor(entry.sandboxId);
    this.writes = this.writes
      .then(async () => {
        await mkdir(this.dir, { recursive: true, mode: 0o700 });
        let size = this.sizes.get(file);
        if (size === undefined) size = await stat(file).then((s) => s.size, () => 0);
        if (size >= this.maxBytes) return; // full: the marker below was written once
        let line = JSON.stringify(entry) + '\n';
        if (size + line.length >= this.maxBytes) {
          line = JSON.stringify({ ...entry, rule: 'audit log full', note: `no further requests of this sandbox are logged (cap ${this.maxBytes} bytes)` }) + '\n';
          size = this.maxBytes;
        } else {
          size += line.length;
        }
        this.sizes.set(file, size);
        await appendFile(file, line, { mode: 0o600 });
      })
      .catch((err) => {
        // Never take the proxy down for a log write; say so once per failure.
        console.error(`audit log write failed: ${(err as Error).message}`);
      });
    this.listeners.emit(entry);
  }

  onEntry(listener: (e: AuditEntry) => void): () => void {
    return this.listeners.add(listener);
  }

  /** Resolves when every recorded entry is on disk. */
  flush(): Promise<void> {
    return this.writes;
  }

  async list(sandboxId: string, opts: { limit?: number } = {}): Promise<AuditEntry[]> {
    await this.flush();
    let text: string;
    try {
      text = await readFile(this.fileFor(sandboxId), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const out: AuditEntry[] = [];
    for (const line of text.split('\n')) {
      if (!line) continue;
      const parsed = AuditEntry.safeParse(JSON.parse(line));
      if (parsed.success) out.push(parsed.data);
    }
    const limit = opts.limit ?? 1000;
    return out.slice(-limit);
  }

  private fileFor(sandboxId: string): string {
    if (!SANDBOX_ID.test(sandboxId)) throw new FactoryError('InvalidInput', `not a sandbox id: ${JSON.stringify(sandboxId).slice(0, 80)}`);
    return path.join(this.dir, `${sandboxId}.jsonl`);
  }
}
