// The pinned Codex CLI for host tests, fetched with `npm pack` into the test
// cache the way the image build fetches it. Codex's default model works in
// code mode through a helper program, codex-code-mode-host, that Codex looks
// for beside its own executable: the package ships both in one folder, and a
// copy made for an unprivileged user keeps them together.
import fs from 'node:fs';
import path from 'node:path';
import { cachedNpmBinary, CODEX_BINARY, fetchNpmBinary } from '../../main/pipeline/agents/npm-binary.js';
import { agentBinaryCacheDir, canExecute } from './claude-code-host.js';

export const CODE_MODE_HOST = 'codex-code-mode-host';

/** The pinned Codex executable (its code-mode host beside it), from the cache or fetched when allowed. */
export async function codexBinary(opts: { allowFetch: boolean }): Promise<string | undefined> {
  const cache = agentBinaryCacheDir();
  const cached = cachedNpmBinary(cache, CODEX_BINARY);
  const bin = cached ?? (opts.allowFetch ? await fetchNpmBinary(cache, CODEX_BINARY) : undefined);
  if (bin && !fs.existsSync(path.join(path.dirname(bin), CODE_MODE_HOST))) {
    throw new Error(`the Codex package has no ${CODE_MODE_HOST} beside ${path.basename(bin)}`);
  }
  return bin;
}

/**
 * A Codex the given user can run: the cached one when the user can execute it,
 * else a copy of Codex and its code-mode host (optionally without the host) in
 * `dir`. With `withoutCodeModeHost` a copy is always made.
 */
export function codexFor(user: string | undefined, binary: string, dir: string, opts: { withoutCodeModeHost?: boolean } = {}): string {
  if (!opts.withoutCodeModeHost && (!user || canExecute(user, binary))) return binary;
  fs.mkdirSync(dir, { recursive: true });
  fs.chmodSync(dir, 0o755);
  const files = opts.withoutCodeModeHost ? ['codex'] : ['codex', CODE_MODE_HOST];
  for (const name of files) {
    const from = name === 'codex' ? binary : path.join(path.dirname(binary), name);
    fs.copyFileSync(from, path.join(dir, name));
    fs.chmodSync(path.join(dir, name), 0o755);
  }
  return path.join(dir, 'codex');
}
