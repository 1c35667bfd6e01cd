// Builds both renderers once, before any e2e file: the files run two at a time,
// and two of them finding a stale build would otherwise build it at once, into one folder.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureE2eRendererBuilt, ensureRendererBuilt } from './build.js';

export default function setup(): void {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
  ensureRendererBuilt(root);
  ensureE2eRendererBuilt(root);
}
