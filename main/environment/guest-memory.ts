// How much memory a repository's sandbox gets. Without a word from the
// repository: the user's default (setting vmMemoryMb). `environment.memoryMb` in
// .factory/pipeline.json asks for another amount (a build that needs more), but
// the repository is untrusted: what it asks is held to the user's cap (setting
// vmMemoryMaxMb, never below the default), and the line shown at Start says so.
// Whole multiples of 256 MiB only: each distinct amount is another machine with
// its own booted snapshot, so a repository cannot make many.
import { z } from 'zod';

export const MEMORY_STEP_MB = 256;
export const MIN_MEMORY_MB = 256;
export const MAX_MEMORY_MB = 65536;

export const MemoryMbSchema = z
  .number()
  .int('must be a whole number of MiB')
  .min(MIN_MEMORY_MB, `must be at least ${MIN_MEMORY_MB} (MiB)`)
  .max(MAX_MEMORY_MB, `must be at most ${MAX_MEMORY_MB} (MiB)`)
  .refine((mb) => mb % MEMORY_STEP_MB === 0, `must be a multiple of ${MEMORY_STEP_MB} (MiB)`);

/** The user's side: the default amount and the most a repository may get. */
export interface MemoryBounds {
  defaultMb: number;
  maxMb: number;
}

export interface GuestMemory {
  /** What the sandbox boots with. */
  memoryMb: number;
  /** What the repository asked for, when it did. */
  requestedMb?: number;
  capped: boolean;
  /** For the lines shown at Start; absent when the repository asked for nothing. */
  line?: string;
}

/** The memory of a sandbox for a repository that asks for `requestedMb` (or nothing), held to the user's cap. */
export function guestMemory(requestedMb: number | undefined, bounds: MemoryBounds): GuestMemory {
  if (requestedMb === undefined) return { memoryMb: bounds.defaultMb, capped: false };
  const cap = Math.max(bounds.maxMb, bounds.defaultMb);
  if (requestedMb > cap) {
    return {
      memoryMb: cap,
      requestedMb,
      capped: true,
      line: `Guest memory ${cap} MiB: pipeline.json environment.memoryMb asks for ${requestedMb} MiB, more than the ${cap} MiB your settings allow a sandbox (vmMemoryMaxMb)`,
    };
  }
  return { memoryMb: requestedMb, requestedMb, capped: false, line: `Guest memory ${requestedMb} MiB (pipeline.json environment.memoryMb)` };
}
