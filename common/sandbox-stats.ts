// What a running sandbox costs the host, sampled from its QEMU process on the host
// (never from inside the guest, which is untrusted). Pure types: no Node, no DOM.

/** One sample of a sandbox's QEMU process. */
export interface SandboxSample {
  /** When it was taken (ms since the epoch, host clock). */
  at: number;
  /** CPU time used since the previous sample, as a percentage of one host core (as `top` counts: 2 busy cores = 200). */
  cpuPercent: number;
  /** Proportional set size: the host memory this QEMU holds, shared pages split among their users. */
  pssBytes: number;
  /** Resident set size (shared pages counted in full). */
  rssBytes: number;
}

/** A sandbox's recent samples, oldest first, and the guest's memory size as QEMU was started with it. */
export interface SandboxStats {
  taskId: string;
  /** The guest's RAM (QEMU `-m`), when its command line says. */
  guestMemoryBytes?: number;
  /** Sampling interval, ms. */
  intervalMs: number;
  /** Whether samples are still being taken (the sandbox runs). */
  live: boolean;
  samples: SandboxSample[];
}

/** How many samples a sandbox keeps: five minutes at one sample every 2 s. */
export const SANDBOX_SAMPLES_KEPT = 150;
export const SANDBOX_SAMPLE_INTERVAL_MS = 2000;
