/**
 * How `skylark accounts set-login` reads its password (src/cli/password.ts): on a terminal it
 * prompts twice with echo off (the typed characters never reach the output), handles backspace,
 * Ctrl-C (exit 130) and Ctrl-D; from a pipe it takes the first line, without `\n`/`\r\n`, and
 * refuses an empty stdin or an over-long line.
 */
import { describe, expect, it } from 'vitest';
import { PassThrough } from 'node:stream';
import { MAX_PASSWORD_LINE_BYTES, PasswordInputError, readFirstLine, readPassword } from '../../../src/cli/password.js';

/** A stand-in terminal: a stream with `isTTY` and `setRawMode` that records the raw-mode calls. */
function fakeTty() {
  const input = Object.assign(new PassThrough(), { isTTY: true, rawModes: [] as boolean[], setRawMode(raw: boolean) {
    input.rawModes.push(raw);
    return input;
  } });
  const output = new PassThrough();
  let shown = '';
  output.on('data', (d) => (shown += d));
  return { input, output, shown: () => shown };
}

/** Types `keys` into the terminal, one chunk per entry, each after the prompt asked. */
async function type(t: ReturnType<typeof fakeTty>, keys: string[]): Promise<void> {
  for (const k of keys) {
    await new Promise((r) => setImmediate(r));
    t.input.write(k);
  }
}

describe('readPassword on a terminal', () => {
  it('asks twice without echo and returns the password', async () => {
    const t = fakeTty();
    const read = readPassword(t.input, t.output);
    await type(t, ['correct horse\r', 'correct horse\r']);
    expect(await read).toBe('correct horse');
    expect(t.shown()).toBe('Password: \nRepeat the password: \n');
    expect(t.input.rawModes).toEqual([true, false, true, false]);
  });

  it('applies backspace', async () => {
    const t = fakeTty();
    const read = readPassword(t.input, t.output);
    await type(t, ['pasX\u007fs\r', 'pass\r']);
    expect(await read).toBe('pass');
  });

  it('refuses two different entries', async () => {
    const t = fakeTty();
    const read = readPassword(t.input, t.output);
    await type(t, ['one\r', 'two\r']);
    await expect(read).rejects.toThrow(/differ/);
  });

  it('Ctrl-C gives up with exit code 130, and leaves raw mode', async () => {
    const t = fakeTty();
    const read = readPassword(t.input, t.output);
    await type(t, ['sec\u0003']);
    const e = await read.catch((x: unknown) => x);
    expect(e).toBeInstanceOf(PasswordInputError);
    expect((e as PasswordInputError).exitCode).toBe(130);
    expect(t.input.rawModes.at(-1)).toBe(false);
  });

  it('Ctrl-D on an empty entry gives up', async () => {
    const t = fakeTty();
    const read = readPassword(t.input, t.output);
    await type(t, ['\u0004']);
    await expect(read).rejects.toThrow(/no password entered/);
  });
});

describe('readPassword from a pipe', () => {
  const piped = (...chunks: Array<string | Buffer>) => {
    const s = new PassThrough();
    for (const c of chunks) s.write(c);
    s.end();
    return s;
  };

  it('takes the first line, without its line ending, across chunks', async () => {
    expect(await readPassword(piped('first ', 'line\nsecond line\n'))).toBe('first line');
    expect(await readPassword(piped('crlf\r\n'))).toBe('crlf');
    expect(await readPassword(piped('no newline at the end'))).toBe('no newline at the end');
    expect(await readPassword(piped(Buffer.from('pässwörd\n')))).toBe('pässwörd');
  });

  it('gives an empty first line as the empty string (the caller refuses it)', async () => {
    expect(await readFirstLine(piped('\nsecond\n'))).toBe('');
  });

  it('refuses an empty stdin', async () => {
    await expect(readPassword(piped())).rejects.toThrow(/no password on stdin/);
  });

  it(`refuses a first line longer than ${MAX_PASSWORD_LINE_BYTES} bytes without reading further`, async () => {
    const s = new PassThrough();
    const read = readPassword(s);
    s.write('x'.repeat(MAX_PASSWORD_LINE_BYTES + 1));
    await expect(read).rejects.toThrow(/longer than/);
  });
});
