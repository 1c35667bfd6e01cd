// Which sandbox (task) each Claude Code session uses, and the session's
// process, kept in <data>/sessions.json so a resumed session finds its sandbox
// and the reaper can find sandboxes whose session died, also after a restart.
import fs from 'node:fs';
import { z } from 'zod';
import { jsonOrUndefined } from '../../common/json.js';
import { writeFileAtomic } from '../state/state-store.js';

export const SessionRecord = z.object({
  sessionId: z.string(),
  taskId: z.string(),
  repoPath: z.string(),
  /** The Claude Code process (from the hook's parent chain) and its start time, against pid reuse. */
  pid: z.number().int().positive().optional(),
  pidStart: z.string().optional(),
  createdAt: z.string(),
  /** 'quarantined': a leak check found a credential; the sandbox is kept for inspection and never reaped. */
  state: z.enum(['active', 'quarantined']),
  /** Subagents with a sandbox of their own: Claude Code's agent_id → their task. */
  agents: z.record(z.string(), z.string()).optional(),
});
export type SessionRecord = z.infer<typeof SessionRecord>;

const FileShape = z.object({ version: z.literal(1), sessions: z.array(SessionRecord) });

export class SessionStore {
  private records = new Map<string, SessionRecord>();
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly file: string,
    private readonly warn: (message: string, meta?: Record<string, unknown>) => void = () => {},
  ) {
    let text: string | undefined;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch {
      // No sessions file yet: no sessions.
      return;
    }
    const parsed = FileShape.safeParse(jsonOrUndefined(text));
    if (!parsed.success) {
      // Kept aside, not lost: the reaper then only knows the sandboxes of new sessions.
      const aside = `${file}.unreadable-${Date.now()}`;
      fs.renameSync(file, aside);
      this.warn('the session records could not be read; moved aside', { file: aside });
      return;
    }
    for (const r of parsed.data.sessions) this.records.set(r.sessionId, r);
  }

  get(sessionId: string): SessionRecord | undefined {
    return this.records.get(sessionId);
  }

  byTask(taskId: string): SessionRecord | undefined {
    return [...this.records.values()].find((r) => r.taskId === taskId);
  }

  all(): SessionRecord[] {
    return [...this.records.values()];
  }

  async put(record: SessionRecord): Promise<void> {
    this.records.set(record.sessionId, record);
    await this.save();
  }

  async remove(sessionId: string): Promise<void> {
    if (this.records.delete(sessionId)) await this.save();
  }

  private save(): Promise<void> {
    const text = JSON.stringify({ version: 1, sessions: this.all() }, null, 2);
    this.writing = this.writing.catch(() => {}).then(() => writeFileAtomic(this.file, text));
    return this.writing;
  }
}

