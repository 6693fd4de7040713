// Frames that are malformed whichever side of a capnweb session sends them, for garbage.mjs (a
// client's frames to a server) and garbage-server.mjs (a server's to a client).

// nested(depth) is a value depth arrays deep, each escaped as capnweb escapes a literal array.
export const nested = (depth) => (depth === 0 ? 1 : [[nested(depth - 1)]]);

export const malformedEitherWay = {
  binary: [Buffer.from("[]")],
  invalid_json: ["{not json"],
  unknown_message: ['["bogus",1]'],
  pull_unknown_id: ['["pull",42]'],
  release_unknown_id: ['["release",99,1]'],
};
