// A real FFmpeg 8.1 RTMP publisher (the libraries of the `node-av` package), run as its own
// process: it remuxes an Ogg Opus file into FLV — FFmpeg 8's FLV muxer writes Opus as Enhanced
// RTMP (`Opus` FourCC, SequenceStart, CodedFrames, and for some layouts MultichannelConfig) —
// and publishes it to the RTMP URL in real time, paced by the packets' timestamps.
// Usage: node ffmpeg8-publish.mjs <ogg file> <rtmp url> [seconds]
// Exit 0 when every packet was written; 1 with the error on stderr.

// node-av uses Promise.withResolvers (Node 22); Node 20 needs it provided.
if (!Promise.withResolvers) {
  Promise.withResolvers = function withResolvers() {
    let resolve;
    let reject;
    const promise = new Promise((a, b) => {
      resolve = a;
      reject = b;
    });
    return { promise, resolve, reject };
  };
}

const [file, url, seconds] = process.argv.slice(2);
const limitMs = seconds ? Number(seconds) * 1000 : Infinity;
try {
  const { Demuxer, Muxer } = await import('node-av/api');
  const input = await Demuxer.open(file);
  const audio = input.audio();
  if (!audio) throw new Error(`${file} has no audio stream`);
  const output = await Muxer.open(url, { format: 'flv' });
  const index = output.addStream(audio);
  const { num, den } = audio.timeBase;
  const t0 = Date.now();
  for await (const packet of input.packets(audio.index)) {
    if (!packet) break;
    const ms = (Number(packet.pts) * num * 1000) / den;
    if (ms > limitMs) break;
    const wait = t0 + ms - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    await output.writePacket(packet, index);
  }
  await output.close();
  await input.close();
  process.exit(0);
} catch (e) {
  process.stderr.write(`ffmpeg8-publish: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
}
