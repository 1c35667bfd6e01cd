// One images folder for the stand-in sandbox host, for the whole run: each
// remote test file's rig links its storage's images/ here, so the base image
// (over a gigabyte) goes over SSH and through its sha256 check once per run,
// not once per file. remote-host.test.ts keeps a folder of its own: it proves
// the first upload. Removed when the run ends.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    rigImagesDir: string;
  }
}

export default function setup(project: TestProject): () => void {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rig-images-'));
  project.provide('rigImagesDir', dir);
  return () => rmSync(dir, { recursive: true, force: true });
}
