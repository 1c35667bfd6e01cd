// The base image recipe lives in vm-images/<name>/ (recipe.json, customize.sh,
// guest files). Its image version includes a hash of those files, so any change
// to the recipe yields a new image folder instead of reusing a stale one.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

export const AgentCliRecipe = z.object({
  name: z.string().regex(/^[a-z0-9-]+$/),
  npmPackage: z.string().min(1),
  version: z.string().regex(/^[0-9A-Za-z.+-]+$/, 'a pinned version, not a range'),
  /** Path of the binary inside the npm package (relative to its package/ folder). */
  binaryInPackage: z.string().regex(/^[^/.][^\0]*$/),
  installAs: z.string().regex(/^\/[^\0]+$/),
  /**
   * Other files of the same package the CLI needs at run time (Codex's code-mode host,
   * which it looks for next to its own executable; its ripgrep). A CLI that runs without
   * them exits 0 having refused every tool call, so the image carries them.
   */
  companions: z
    .array(z.object({ fileInPackage: z.string().regex(/^[^/.][^\0]*$/), installAs: z.string().regex(/^\/[^\0]+$/) }))
    .max(16)
    .default([]),
});
export type AgentCliRecipe = z.infer<typeof AgentCliRecipe>;

export const ImageRecipe = z.object({
  name: z.string().regex(/^[a-z0-9-]+$/),
  revision: z.number().int().nonnegative(),
  suite: z.string().min(1),
  variant: z.string().min(1),
  architecture: z.literal('amd64'),
  packages: z.array(z.string().regex(/^[a-z0-9][a-z0-9+.-]*$/)).min(1),
  dpkgOptions: z.array(z.string()).default([]),
  diskSizeMb: z.number().int().min(1024),
  kernelCmdline: z.string().min(1),
  agentClis: z.array(AgentCliRecipe).default([]),
});
export type ImageRecipe = z.infer<typeof ImageRecipe>;

export interface LoadedRecipe {
  dir: string;
  recipe: ImageRecipe;
  /** e.g. debian-bookworm-r1-3fa2c9d1 */
  version: string;
}

export const DEFAULT_RECIPE = 'debian-bookworm';

/** Finds vm-images/ by walking up from this module (works from sources and from dist/). */
export function findRecipeDir(name = DEFAULT_RECIPE, from = path.dirname(fileURLToPath(import.meta.url))): string {
  let dir = from;
  for (;;) {
    const candidate = path.join(dir, 'vm-images', name);
    if (existsSync(path.join(candidate, 'recipe.json'))) return candidate;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`image recipe "${name}" not found: no vm-images/${name}/recipe.json above ${from}`);
    dir = parent;
  }
}

export function loadRecipe(dir: string): LoadedRecipe {
  const file = path.join(dir, 'recipe.json');
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`image recipe ${file} is not readable JSON: ${(err as Error).message}`);
  }
  const parsed = ImageRecipe.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`image recipe ${file}: ${issue?.path.join('.') || 'recipe'}: ${issue?.message}`);
  }
  const recipe = parsed.data;
  return { dir, recipe, version: `${recipe.name}-r${recipe.revision}-${hashTree(dir).slice(0, 8)}` };
}

function hashTree(dir: string): string {
  const hash = createHash('sha256');
  const walk = (rel: string) => {
    const entries = readdirSync(path.join(dir, rel)).sort();
    for (const entry of entries) {
      const relPath = path.join(rel, entry);
      const full = path.join(dir, relPath);
      const st = statSync(full);
      if (st.isDirectory()) walk(relPath);
      else {
        hash.update(relPath + '\0' + (st.mode & 0o111 ? 'x' : '-') + '\0');
        hash.update(readFileSync(full));
        hash.update('\0');
      }
    }
  };
  walk('');
  return hash.digest('hex');
}
