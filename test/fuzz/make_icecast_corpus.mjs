// Regenerates the seed corpus of fuzz_icecast_source from the FFmpeg-made fixtures
// (test/fixtures/icecast): `node test/fuzz/make_icecast_corpus.mjs`. A seed is the target's two
// control bytes (codec | 0x80 for the 1024-byte frame limit; chunking, 0 = byte by byte) and a
// request body: fixture prefixes, a chained Ogg stream, other codecs, junk. Seeds stay < 16 KB.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = path.join(here, '..', 'fixtures', 'icecast');
const dir = path.join(here, 'corpus', 'fuzz_icecast_source');
const read = (name) => fs.readFileSync(path.join(fixtures, name));
const MP3 = 0, AAC = 1, OPUS = 2;

fs.rmSync(dir, { recursive: true, force: true });
fs.mkdirSync(dir, { recursive: true });
function seed(name, codec, chunk, ...parts) {
  fs.writeFileSync(path.join(dir, name), Buffer.concat([Buffer.from([codec, chunk]), ...parts]));
}

const mp3 = read('mp3_44k1_stereo_128k.mp3');
const mp3lsf = read('mp3_22k05_mono_32k.mp3');
const aac48 = read('aac_48k_stereo_96k.aac');
const aac44 = read('aac_44k1_mono_48k.aac');
const opusA = read('opus_48k_stereo_64k.ogg');
const opusB = read('opus_48k_stereo_64k_b.ogg');
const opusMono = read('opus_48k_mono_32k.ogg');
const junk = Buffer.from([0x54, 0x41, 0x47, 0, 0xff, 0xfb, 0x90, 0x64, 1, 2, 3, 0xff, 0xf1, 0x4c, 0x80, 7]);

seed('mp3_id3_info_frames', MP3, 5, mp3.subarray(0, 6000));
seed('mp3_bytewise', MP3, 0, mp3.subarray(0, 2000));
seed('mp3_lsf_junk', MP3, 40, mp3lsf.subarray(0, 1500), junk, mp3lsf.subarray(1500, 3000));
seed('mp3_small_limit', MP3 | 0x80, 9, mp3.subarray(0, 3000));
seed('aac_48k', AAC, 7, aac48.subarray(0, 6000));
seed('aac_config_change', AAC, 100, aac48.subarray(0, 2000), junk, aac44.subarray(0, 2000));
seed('opus_start', OPUS, 3, opusA.subarray(0, 6000));
seed('opus_bytewise', OPUS, 0, opusMono.subarray(0, 1500));
seed('opus_chained', OPUS, 60, opusA.subarray(opusA.length - 3000), opusB.subarray(0, 3000), opusMono.subarray(0, 3000));
seed('opus_small_limit', OPUS | 0x80, 11, opusMono);
seed('ogg_vorbis', OPUS, 20, read('vorbis_44k1_stereo.ogg').subarray(0, 4500));
seed('ogg_flac', OPUS, 20, read('flac_44k1_mono.ogg').subarray(0, 3000));
seed('mismatch_ogg_as_mp3', MP3, 30, opusMono.subarray(0, 1000));
seed('mismatch_mp3_as_ogg', OPUS, 30, mp3.subarray(0, 2000));
seed('mismatch_mp2_as_aac', AAC, 30, read('mp2_44k1_stereo.mp2').subarray(0, 2000));
