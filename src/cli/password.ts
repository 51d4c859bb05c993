/**
 * Reading a password for the CLI (`accounts set-login`, docs/behaviour.md §1) from stdin, never from the
 * command line: argv is readable by every user of the machine (`ps`, /proc/<pid>/cmdline) and ends
 * up in shell history. On a terminal the password is typed twice with echo off; otherwise the
 * first line of stdin is the password (`printf '%s\n' "$PW" | skylark accounts set-login …`).
 */

/** Longest password line read from a pipe (bytes, UTF-8); a longer first line is refused. */
export const MAX_PASSWORD_LINE_BYTES = 4096;

/** Why no password was read; `exitCode` is what the CLI exits with (130 for Ctrl-C). */
export class PasswordInputError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/** The input side: process.stdin, or a stand-in in tests. */
export type PasswordInput = NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (raw: boolean) => unknown };

/**
 * Reads the password: on a TTY (`input.isTTY` with `setRawMode`) prompts on `output` without echo,
 * twice; else reads the first line of `input` (without its `\n` or `\r\n`).
 * @throws PasswordInputError when stdin is empty, the line is longer than MAX_PASSWORD_LINE_BYTES,
 *   the two entries differ, or the user pressed Ctrl-C / Ctrl-D.
 */
export async function readPassword(input: PasswordInput = process.stdin, output: NodeJS.WritableStream = process.stderr): Promise<string> {
  if (input.isTTY && typeof input.setRawMode === 'function') {
    const first = await promptHidden('Password: ', input, output);
    const again = await promptHidden('Repeat the password: ', input, output);
    if (first !== again) throw new PasswordInputError('the two passwords differ');
    return first;
  }
  return readFirstLine(input);
}

/** The first line of `input` (bytes up to the first `\n`, a trailing `\r` dropped). */
export async function readFirstLine(input: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  let sawNewline = false;
  for await (const chunk of input) {
    const b = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
    const nl = b.indexOf(0x0a);
    const part = nl >= 0 ? b.subarray(0, nl) : b;
    chunks.push(part);
    size += part.length;
    if (size > MAX_PASSWORD_LINE_BYTES) throw new PasswordInputError(`the first line of stdin is longer than ${MAX_PASSWORD_LINE_BYTES} bytes`);
    if (nl >= 0) {
      sawNewline = true;
      break; // the rest of stdin is not read (leaving the loop destroys the stream)
    }
  }
  const line = Buffer.concat(chunks, size).toString('utf8').replace(/\r$/, '');
  if (line === '' && !sawNewline) throw new PasswordInputError('no password on stdin: pipe it in as the first line, or run the command in a terminal');
  return line;
}

/** Prompts on `output` and reads one line from a raw-mode TTY without echoing it. */
function promptHidden(question: string, input: PasswordInput, output: NodeJS.WritableStream): Promise<string> {
  return new Promise((resolve, reject) => {
    output.write(question);
    input.setRawMode!(true);
    input.setEncoding('utf8');
    input.resume();
    let value = '';
    const finish = (error: PasswordInputError | null) => {
      input.removeListener('data', onData);
      input.setRawMode!(false);
      input.pause();
      output.write('\n');
      if (error) reject(error);
      else resolve(value);
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n') return finish(null);
        if (ch === '\u0003') return finish(new PasswordInputError('interrupted', 130)); // Ctrl-C (raw mode: no SIGINT)
        if (ch === '\u0004') return finish(value === '' ? new PasswordInputError('no password entered') : null); // Ctrl-D
        if (ch === '\u007f' || ch === '\b') value = Array.from(value).slice(0, -1).join('');
        else if (ch >= ' ') value += ch;
      }
    };
    input.on('data', onData);
  });
}
