// What the app window's web contents may do: navigate only to the app's own page,
// open no windows, attach no webviews. Kept free of Electron imports (the contents
// are typed structurally) so it is unit-tested under plain Node; security.ts calls
// hardenContents for every web contents the app creates.
import { isOwnPage } from './sender-check.js';

/**
 * Whether a frame (the main frame or any subframe) may navigate to `url`: only to
 * the app's own page on file:// (a reload, or its query or hash changing). Any other
 * page, scheme, file or host is refused, so neither a link, a dropped file, a
 * redirect nor script in a frame can take the window or a frame elsewhere.
 */
export function mayNavigate(url: string | undefined, pageFile: string): boolean {
  return isOwnPage(url, pageFile);
}

/** The navigation events' first argument (Electron's Event<...EventParams>). */
export interface NavigationEventLike {
  readonly url: string;
  preventDefault(): void;
}

/** The parts of Electron's WebContents hardenContents uses. */
export interface WebContentsLike {
  on(event: 'will-navigate', listener: (event: NavigationEventLike) => void): unknown;
  on(event: 'will-frame-navigate', listener: (event: NavigationEventLike) => void): unknown;
  on(event: 'will-redirect', listener: (event: NavigationEventLike) => void): unknown;
  on(event: 'will-attach-webview', listener: (event: { preventDefault(): void }) => void): unknown;
  setWindowOpenHandler(handler: () => { action: 'deny' }): void;
}

export function hardenContents(contents: WebContentsLike, pageFile: string): void {
  const guard = (event: NavigationEventLike) => {
    if (!mayNavigate(event.url, pageFile)) event.preventDefault();
  };
  // will-navigate covers the main frame only; will-frame-navigate covers every frame.
  contents.on('will-navigate', guard);
  contents.on('will-frame-navigate', guard);
  contents.on('will-redirect', guard);
  contents.on('will-attach-webview', (event) => event.preventDefault());
  contents.setWindowOpenHandler(() => ({ action: 'deny' }));
}
