// Which IPC senders may call the API: only our own renderer page on file://.
// Kept free of Electron imports so it is unit-tested under plain Node.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** True when the URL is exactly our renderer page on file:// (query and hash ignored). */
export function isOwnPage(url: string | undefined, pageFile: string): boolean {
  if (!url) return false;
  try {
    const u = new URL(url);
    if (u.protocol !== 'file:' || (u.host !== '' && u.host !== 'localhost')) return false;
    // Compared as given, not normalised: `index.html/` or `renderer//index.html` is not our page.
    return fileURLToPath(u) === path.resolve(pageFile);
  } catch {
    return false;
  }
}
