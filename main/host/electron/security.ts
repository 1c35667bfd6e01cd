// Hardening shared by every window and web contents of the app (DESIGN.md, trust model).
import { app, session, type WebContents } from 'electron';

/** The CSP of the renderer; also in index.html as a meta tag, since file:// responses carry no headers. */
export const ELECTRON_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export function hardenSession(): void {
  const ses = session.defaultSession;
  ses.webRequest.onHeadersReceived((details, callback) => {
    callback({
      responseHeaders: { ...details.responseHeaders, 'Content-Security-Policy': [ELECTRON_CSP] },
    });
  });
  // No camera, microphone, notifications, geolocation, ... for anything.
  ses.setPermissionRequestHandler((_wc, _permission, callback) => callback(false));
  ses.setPermissionCheckHandler(() => false);
  app.on('web-contents-created', (_event, contents) => hardenContents(contents));
}

function hardenContents(contents: WebContents): void {
  // The app is one page: no navigation (a dropped file would otherwise open), no new windows, no webviews.
  contents.on('will-navigate', (event) => event.preventDefault());
  contents.on('will-redirect', (event) => event.preventDefault());
  contents.on('will-attach-webview', (event) => event.preventDefault());
  contents.setWindowOpenHandler(() => ({ action: 'deny' }));
}
