// Hardening shared by every window and web contents of the app (DESIGN.md, trust model).
import { app, session } from 'electron';
import { hardenContents } from './navigation-guard.js';

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

/** Hardens the default session and every web contents created from now on; pageFile is the app's one page. */
export function hardenSession(pageFile: string): void {
  const ses = session.defaultSession;
  ses.webRequest.onHeadersReceived((details, callback) => {
    callback({
      responseHeaders: { ...details.responseHeaders, 'Content-Security-Policy': [ELECTRON_CSP] },
    });
  });
  // No camera, microphone, notifications, geolocation, USB/HID/serial devices, ... for anything.
  ses.setPermissionRequestHandler((_wc, _permission, callback) => callback(false));
  ses.setPermissionCheckHandler(() => false);
  ses.setDevicePermissionHandler(() => false);
  // The app is one page: no navigation away from it in any frame (a dropped file
  // would otherwise open), no new windows, no webviews.
  app.on('web-contents-created', (_event, contents) => hardenContents(contents, pageFile));
}
