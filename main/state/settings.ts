// User settings (not secrets) kept by `conf` in the data dir, read back through
// a zod schema so a hand-edited file with a bad value falls back to the default
// for that field instead of breaking the app. Each change keeps the file it
// replaces as `settings.json.bak`; a file that is not JSON at all (truncated,
// garbled) is moved aside, reported, and its backup read instead.
import Conf from 'conf';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { backupOf, type StateProblem } from './state-store.js';
import { defaultEgressRules, EgressRule } from '../../common/egress.js';
import { EditorCommand, MAX_KEEP_MINUTES } from '../../common/domain.js';

import { SandboxHostSetting } from '../../common/sandbox-hosts.js';

/** A machine sandboxes may run on, reached over SSH (issue 14); one schema with the hosts.* API. */
export { SandboxHostSetting };

/** The defaults of vmMemoryMb and vmMemoryMaxMb: guest memory without a word from the repository, and the most it may ask for. */
export const DEFAULT_MEMORY_BOUNDS: Readonly<{ defaultMb: number; maxMb: number }> = { defaultMb: 1024, maxMb: 4096 };

export const SettingsSchema = z.object({
  /** How many tasks may provision and run their pipeline at the same time. */
  maxParallelTasks: z.number().int().min(1).max(32).default(2),
  /** Agent used when a task does not choose one ('command' runs the pipeline.json commands). */
  defaultAgent: z.string().min(1).max(64).default('command'),
  /** Guest memory per sandbox. */
  vmMemoryMb: z.number().int().min(256).max(65536).default(DEFAULT_MEMORY_BOUNDS.defaultMb),
  /** The most guest memory a repository may ask for (pipeline.json environment.memoryMb). */
  vmMemoryMaxMb: z.number().int().min(256).max(65536).default(DEFAULT_MEMORY_BOUNDS.maxMb),
  vmCpus: z.number().int().min(1).max(64).default(2),
  /** Logs of terminal sessions that ended longer ago are deleted at start-up; 0 keeps them forever. */
  terminalLogRetentionDays: z.number().int().min(0).max(3650).default(30),
  /** Where every sandbox may go without a credential, per pipeline step (package registries by default). */
  egressRules: z.array(EgressRule).max(200).default(() => defaultEgressRules()),
  /** Egress the user allowed for one repository from now on, keyed by the repository's real path. */
  repoEgress: z.record(z.string(), z.array(EgressRule).max(200)).default(() => ({})),
  /** Sandboxes trust the certificate authorities this computer trusts (needed behind a TLS-inspecting proxy). */
  guestTrustsHostCertificates: z.boolean().default(true),
  /** Disk budget of cached environment layers; the least recently used go first. */
  layerBudgetGb: z.number().min(1).max(4096).default(20),
  /** Minutes a sandbox is kept for inspection after Approve or Reject; 0 destroys it at once (at most 24 h). */
  keepSandboxAfterDecisionMinutes: z.number().int().min(0).max(MAX_KEEP_MINUTES).default(0),
  /** The program "Open in editor" runs on the host, with the repository path as its one argument (no shell). */
  editorCommand: EditorCommand.default('code'),
  /** Sandboxes kept restored and waiting for a task (main/pool); 0 turns the pool off. */
  warmPoolSize: z.number().int().min(0).max(16).default(1),
  /** Guest memory running and pooled sandboxes may hold together before the pool stops refilling; 0: half of this computer's memory. */
  warmPoolMemoryBudgetMb: z.number().int().min(0).max(4 * 1024 * 1024).default(0),
  /** Machines sandboxes may run on besides this one (issue 14). */
  sandboxHosts: z
    .array(SandboxHostSetting)
    .max(32)
    .refine((hosts) => new Set(hosts.map((h) => h.name)).size === hosts.length, 'sandbox host names must be unique')
    .default(() => []),
});
export type Settings = z.infer<typeof SettingsSchema>;

export class SettingsStore {
  private readonly conf: Conf<Record<string, unknown>>;
  private readonly file: string;
  /** A settings file that could not be read at start, with what stands in for it. */
  readonly problems: StateProblem[] = [];

  constructor(opts: { dir: string }) {
    this.file = path.join(opts.dir, 'settings.json');
    const open = () =>
      new Conf<Record<string, unknown>>({
        cwd: opts.dir,
        configName: 'settings',
        projectName: 'factory-in-a-box',
        projectSuffix: '',
      });
    try {
      this.conf = open();
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err;
      this.problems.push(this.recover(err.message));
      this.conf = open();
    }
  }

  /** Moves the unreadable file aside and puts its backup (when that one is JSON) in its place. */
  private recover(error: string): StateProblem {
    const problem: StateProblem = { file: this.file, error };
    const keptAs = `${this.file}.corrupt-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    try {
      fs.renameSync(this.file, keptAs);
      problem.keptAs = keptAs;
    } catch {
      // Left where it is: conf then fails again, and the error names the file.
      return problem;
    }
    const backup = backupOf(this.file);
    try {
      const text = fs.readFileSync(backup, 'utf8');
      JSON.parse(text);
      const tmp = `${this.file}.${process.pid}.restore.tmp`;
      fs.writeFileSync(tmp, text, { mode: 0o600 });
      fs.renameSync(tmp, this.file);
      problem.restoredFrom = backup;
    } catch {
      // No usable backup: every setting reads as its default, and the problem says so.
    }
    return problem;
  }

  /** Points settings.json.bak at the file as it is now, before a change replaces it. */
  private keepBackup(): void {
    const tmp = `${this.file}.${process.pid}.bak.tmp`;
    try {
      fs.copyFileSync(this.file, tmp);
      fs.renameSync(tmp, backupOf(this.file));
    } catch {
      fs.rmSync(tmp, { force: true }); // no file yet, or no room: a backup helps, it does not block the change
    }
  }

  get(): Settings {
    const raw = this.conf.store;
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(SettingsSchema.shape) as Array<keyof Settings>) {
      const field = SettingsSchema.shape[key].safeParse(raw[key]);
      out[key] = field.success ? field.data : SettingsSchema.shape[key].parse(undefined);
    }
    return out as Settings;
  }

  set(patch: Partial<Settings>): Settings {
    const next = SettingsSchema.parse({ ...this.get(), ...patch });
    this.keepBackup();
    this.conf.set(next);
    return next;
  }
}
