/**
 * The confirmation step of the dashboard's destructive forms (delete, revoke, roll, reset,
 * archive): the first POST answers a page asking to confirm (`confirmBody`), whose button posts
 * the same form again with `confirm=yes`.
 */
import type { WebReply } from '../../base/http/server.js';
import { confirmBody, type Section } from './html.js';
import type { DashRequest } from './router.js';

/** What a confirmation page asks (see `confirmBody`; the CSRF token is the request's session's). */
export interface ConfirmStep {
  /** The question (the page's heading). */
  title: string;
  /** What happens once confirmed. */
  message: string;
  /** Where the confirming form posts (the same route, with `confirm=yes`). */
  action: string;
  /** The confirming button's label. */
  button: string;
  /** Where "Cancel" leads. */
  back: string;
}

/**
 * The confirmation page of a destructive POST (titled `pageTitle`, under `section` of the
 * navigation) when its form does not carry `confirm=yes`; null when it does (go on).
 */
export function unconfirmed(r: DashRequest, pageTitle: string, section: Section, step: ConfirmStep): WebReply | null {
  if (r.form.get('confirm') === 'yes') return null;
  return r.page(pageTitle, section, confirmBody({ ...step, csrf: r.session.csrfToken }));
}
