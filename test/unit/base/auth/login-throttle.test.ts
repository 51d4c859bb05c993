/** Per-account backoff of failed owner logins (src/base/auth/login-throttle.ts): schedule, bounds, reset, known addresses, memory. */
import { describe, expect, it } from 'vitest';
import { LoginThrottle } from '../../../../src/base/auth/login-throttle.js';

const setup = (options: ConstructorParameters<typeof LoginThrottle>[1] = {}) => {
  const clock = { t: 1_000_000 };
  return { clock, throttle: new LoginThrottle(() => clock.t, options) };
};

/** `n` failed attempts from distinct addresses, each after the previous lock ended. */
function fail(t: LoginThrottle, clock: { t: number }, email: string, n: number, from = 0): void {
  for (let i = 0; i < n; i++) {
    const c = t.begin(email, `10.0.${(from + i) >> 8}.${(from + i) & 255}`);
    if (!c.allowed) {
      clock.t += c.retryAfterMs;
      i--;
    }
  }
}

describe('LoginThrottle', () => {
  it('five failures are free; then 1 s, 2 s, 4 s … up to 15 min, from any address', () => {
    const { clock, throttle } = setup();
    fail(throttle, clock, 'a@x.example', 5);
    expect(throttle.begin('a@x.example', '10.9.9.9').allowed).toBe(true); // the sixth attempt is checked (and, unanswered, counted)
    const waits: number[] = [];
    for (let k = 0; k < 14; k++) {
      const c = throttle.begin('A@X.example ', `10.8.0.${k}`); // case and spaces do not make another account
      expect(c.allowed).toBe(false);
      const ms = (c as { retryAfterMs: number }).retryAfterMs;
      waits.push(ms / 1000);
      clock.t += ms;
      expect(throttle.begin('a@x.example', `10.7.0.${k}`).allowed).toBe(true);
    }
    expect(waits).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900, 900, 900]);
  });

  it('a refused attempt is not counted: the lock does not grow while it is hammered', () => {
    const { clock, throttle } = setup();
    fail(throttle, clock, 'a@x.example', 6);
    for (let i = 0; i < 100; i++) expect(throttle.begin('a@x.example', `10.1.0.${i}`)).toEqual({ allowed: false, retryAfterMs: 1000 });
    clock.t += 1000;
    expect(throttle.begin('a@x.example', '10.2.0.1').allowed).toBe(true);
  });

  it('parallel attempts: each one counts as soon as it begins', () => {
    const { throttle } = setup();
    const results = Array.from({ length: 10 }, (_, i) => throttle.begin('a@x.example', `10.0.0.${i}`).allowed);
    expect(results).toEqual([true, true, true, true, true, true, false, false, false, false]);
  });

  it('a success resets the account; failures are forgotten 24 h after the last one', () => {
    const { clock, throttle } = setup();
    fail(throttle, clock, 'a@x.example', 8);
    const c = throttle.begin('a@x.example', '10.3.0.1');
    expect(c.allowed).toBe(false);
    clock.t += (c as { retryAfterMs: number }).retryAfterMs;
    expect(throttle.begin('a@x.example', '10.3.0.1').allowed).toBe(true);
    throttle.succeeded('a@x.example', '10.3.0.1');
    fail(throttle, clock, 'a@x.example', 5, 100);
    expect(throttle.begin('a@x.example', '10.3.0.2').allowed).toBe(true); // five free again, sixth checked
    expect(throttle.begin('a@x.example', '10.3.0.3').allowed).toBe(false);
    clock.t += 24 * 3600_000 + 1;
    expect(throttle.begin('a@x.example', '10.3.0.4').allowed).toBe(true);
    expect(throttle.begin('a@x.example', '10.3.0.5').allowed).toBe(true); // counting started over
  });

  it('an address the owner signed in from keeps its own count while the account is locked elsewhere', () => {
    const { clock, throttle } = setup();
    expect(throttle.begin('a@x.example', '198.51.100.7').allowed).toBe(true);
    throttle.succeeded('a@x.example', '198.51.100.7');
    fail(throttle, clock, 'a@x.example', 20);
    expect(throttle.begin('a@x.example', '10.200.0.1').allowed).toBe(false);
    expect(throttle.begin('a@x.example', '198.51.100.7').allowed).toBe(true);
    // Its own failures lock only it.
    for (let i = 0; i < 6; i++) throttle.begin('a@x.example', '198.51.100.7');
    expect(throttle.begin('a@x.example', '198.51.100.7').allowed).toBe(false);
    // Known for 30 days.
    clock.t += 31 * 24 * 3600_000;
    throttle.succeeded('b@x.example', '10.0.0.1'); // any activity; the old address is no longer known
    fail(throttle, clock, 'a@x.example', 6, 500);
    expect(throttle.begin('a@x.example', '198.51.100.7').allowed).toBe(false);
  });

  it('holds at most maxTracked records, least recently tried dropped first', () => {
    const { throttle } = setup({ maxTracked: 100 });
    for (let i = 0; i < 6; i++) throttle.begin('target@x.example', `10.0.0.${i}`);
    for (let i = 0; i < 1000; i++) {
      throttle.begin(`spray${i}@x.example`, '10.1.1.1');
      if (i % 50 === 0) throttle.begin('target@x.example', '10.0.0.99'); // refused: still tracked, still locked
      expect(throttle.tracked).toBeLessThanOrEqual(100);
    }
    expect(throttle.begin('target@x.example', '10.0.0.100').allowed).toBe(false);
  });
});
