#!/usr/bin/env bash
# Installs the MCP servers the client's tests run (userspace/mcp/tests, the
# boot tests), from the npm registry: tests/mcp-servers/package-lock.json
# pins each package's version and its integrity hash, and `npm ci` refuses
# a package whose hash differs. Into out/mcp-servers, again only when the
# lock changed. And one Python server from PyPI (below).
source "$(dirname "$0")/lib.sh"
SRC=$REPO/tests/mcp-servers
DEST=$OUT/mcp-servers

# Debian's own when the machine has none (a machine image may carry another
# Node.js, whose bundled npm Debian's npm package would conflict with, so
# this is not in scripts/deps.sh's list).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm \
    || die "the MCP test servers need node and npm: apt-get install nodejs npm failed"
fi
(( $(node -p 'process.versions.node.split(".")[0]') >= 18 )) \
  || die "the MCP test servers need Node.js 18 or later, found $(node --version)"
# The Python server, mcp-server-time (PyPI) and every package it imports,
# as wheels pinned by hash for the box's Python (Debian trixie's 3.13, from
# the python extension, specs/extensions): unpacked into
# out/mcp-servers-python, which the boot tests put into an extension of
# their own and run with `python3 -m mcp_server_time`.
PYPI=https://files.pythonhosted.org/packages
WHEELS=(
  "$PYPI/99/91/8acff4f5e50511b911bbccb72b8628a49c68ce14148cd9f6431094859a90/annotated_types-0.8.0-py3-none-any.whl f072f4d804ea359e4eaf198b1af7a8b0943881a87f31bb764f8bf219bb9419e0"
  "$PYPI/a9/16/7757fb84c819accc7d7e9af5291b261e4abb8627ee040f99e7d35ef2457a/anyio-4.16.0-py3-none-any.whl c66ae634e0b8228396b801741beb3294326d4b6102f7bba4041c0dfb58c29026"
  "$PYPI/64/b4/17d4b0b2a2dc85a6df63d1157e028ed19f90d4cd97c36717afef2bc2f395/attrs-26.1.0-py3-none-any.whl c647aa4a12dfbad9333ca4e71fe62ddc36f4e63b2d260a37a8b83d2f043ac309"
  "$PYPI/95/95/86342356ff5953b3fb06f7ef7c5bee212d45e770abc7218d451b9148313c/cffi-2.1.1-cp313-cp313-manylinux2014_x86_64.manylinux_2_17_x86_64.whl a931079504ecc49efed7744c476a5c343a92fabf66dec2db95edb1b2fdc770e2"
  "$PYPI/31/7d/164b7ffc8624fe9efb4221bf9af485d5c1e41b9ae118045d2b6dc5457d8b/click-8.5.1-py3-none-any.whl 8bb5376d2006950386f8c6427613334a2acadc5f559cb80e638d00b4df957e37"
  "$PYPI/21/69/64cef1f702bf6657e0cc186ed1a2891d50d29fb41586b254e1c07adea261/cryptography-50.0.2-cp311-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl 630ebfea3bf689d075f82316324ff7433dc447fe6bc1bfc76524b74b4a9567d2"
  "$PYPI/04/4b/29cac41a4d98d144bf5f6d33995617b185d14b22401f75ca86f384e87ff1/h11-0.16.0-py3-none-any.whl 63cf8bbe7522de3bf65932fda1d9c2772064ffb3dae62d55932da54b31cb6c86"
  "$PYPI/2a/e8/009c347feac27f8960605aa98d55ed263b5870dd4fd80b82fd1d00d5716c/httpcore2-2.16.2-py3-none-any.whl 16051ae2a42f776007543f32de9349a317b23d2cbb4e1456b4bac0e88b87419a"
  "$PYPI/77/de/8c4306a3d6aa2495111986addf33a9e561eff4c47552e4c4b9251160d0ad/httpx2-2.16.2-py3-none-any.whl f05c13aade4c45dbf1c9060647a1058f0acad62398fad96e741269edb33d46f5"
  "$PYPI/58/a2/bb081bab032533a855d44de1d56f8e8426114ff1ba5d1f07a438a0a654f8/idna-3.20-py3-none-any.whl ab7ae7122974553370f0bdb919e1a960b2cd1bc1ef0276416d896db81c14582c"
  "$PYPI/69/90/f63fb5873511e014207a475e2bb4e8b2e570d655b00ac19a9a0ca0a385ee/jsonschema-4.26.0-py3-none-any.whl d489f15263b8d200f8387e64b4c3a75f06629559fb73deb8fdfb525f2dab50ce"
  "$PYPI/41/45/1a4ed80516f02155c51f51e8cedb3c1902296743db0bbc66608a0db2814f/jsonschema_specifications-2025.9.1-py3-none-any.whl 98802fee3a11ee76ecaca44429fda8a41bff98b00a0f2838151b113f210cc6fe"
  "$PYPI/20/d7/4a2878f128df729db3ca04e71bfce26405cc2e0c9ebe19c592feeb4c61b9/mcp-2.3.0-py3-none-any.whl dd0c44c089d16453e8ae31a3877a0054d7a2314caaa81f5e0541b9b1734b2377"
  "$PYPI/69/d4/d16c3771225ea2744a529ffca08bc5394b1cff5ee141d5b2178dd1279d06/mcp_server_time-2026.10.19-py3-none-any.whl 5c099a001c6ca78260bda419f2e9b2aabee1adc4fe6ca56d8959871ad8da58a1"
  "$PYPI/ce/48/32583066b155bb5d4507e7887dc88ee23118cc4de8e2a12870c49719e2a8/mcp_types-2.3.0-py3-none-any.whl 968efdbdaedfab06adae40d378a34395f1090c5921d4be3c9cde283aaf76d91d"
  "$PYPI/a9/2d/610db864d7513158cebb8f36cc88e67e73bd6c7aa1905ef18d89e1281c81/opentelemetry_api-1.45.2-py3-none-any.whl 2cbd737377e710ee740d261c94e93fa0f08e6d037c18f17513cc0a2d94479a34"
  "$PYPI/b6/ae/315bbeee126a769cbde43cf4908acb4b40408d8bf8bbf334dd7368d8dadf/pycparser-3.12-py3-none-any.whl a076f3f489b39b43ed13563a1dafe42447445bec2e294154ec5c57fcdda4c85e"
  "$PYPI/8a/8c/824a686c4ba815ddb0722f9e66272088bccd4e1ae1d2f7015375e4a4fc7f/pydantic-2.14.4-py3-none-any.whl 653a2ad9f6d8858529c77c72717d0ea991d6c6837fe683246b2f4b2bbfc3fadc"
  "$PYPI/13/c2/62015187d0e986dafc530ea4df390fce3d3379c744959148806668d40ab9/pydantic_core-2.50.5-cp313-cp313-manylinux2014_x86_64.manylinux_2_17_x86_64.whl cbfde3ad127786f1dea1a6cd89a5eb824a16203f24743ad2b4e07506f43bc844"
  "$PYPI/50/ca/44de4e75f8aadc457f0634be3b542815078ded46dca30efb960edeecad6e/pyjwt-2.15.1-py3-none-any.whl 42d59d631f7768a1028a64c7ff581a9bf7519804daf91fc5b6c56e30eec5e193"
  "$PYPI/f5/0e/090c52b122d8ec5fa37942c1410fea9cf04ce98bca0c84dde7f0aa11594d/python_multipart-0.0.34-py3-none-any.whl ebacd224bd686eee2f9aa1066a657affe07435a185834e05e5235e2e59173e91"
  "$PYPI/2c/58/ca301544e1fa93ed4f80d724bf5b194f6e4b945841c5bfd555878eea9fcb/referencing-0.37.0-py3-none-any.whl 381329a9f99628c9069361716891d34ad94af76e461dcb0335825aecc7692231"
  "$PYPI/a0/36/76fab39973ee11e7f9f357c55138197bb01c86f6502cb76487e3b4f42db0/rpds_py-2026.9.1-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl 7868b85224291c6cb6759f9b5adb9745f486d226f62b16a614dd5a2a5ab2b35b"
  "$PYPI/6a/11/25cabac0a24fa76f58637d8671b549c90d818d69d26beecf0c59a3b186e0/sse_starlette-3.7.0-py3-none-any.whl f1d3136caa12d129284fca3d2ded79bc9af943320b6472712955fea52a6d3eea"
  "$PYPI/88/2e/947cfe02def9371c07cd5bf5b6b61c829e9aecb9904db02a66cfafbc1eec/starlette-1.10.0-py3-none-any.whl 478c0ab3b4ced6e82719849c118fa406f0278a3499c1a898cd15cd31bdc38ce4"
  "$PYPI/51/e9/3a7820be2bb0fe53b6bc9c3be26d3d1158004e4c3ab953aa6840b955b1e9/truststore-0.10.5-py3-none-any.whl 9aaaedaefaf06d8b206278cf8b5012bc897f485a874503501e12d776df78951c"
  "$PYPI/49/d3/b8441a820a491ddfc024b0b0cf0393375b75ea13866d9c66727e54c2fc80/typing_extensions-4.16.0-py3-none-any.whl 481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8"
  "$PYPI/de/0c/ea2544850a7c135e15033a5c7a8e7211136184b7ae63e2239d557c2b3019/typing_inspection-0.4.5-py3-none-any.whl bc210535442b39e1bf2805e0c7a17dfd6a4ace760c84c7f7d16245d23a6b1c39"
  "$PYPI/0a/66/9a06c2227fedfd4919f0eaaa8b94377d9730882a7e4f95823c9a331ab5e1/tzdata-2026.6-py2.py3-none-any.whl 0a10eec6e13ef16b627fabed9a5f2ba61a62b1c67f327305f4e7e412a70b4aec"
  "$PYPI/7b/c1/9be4e1a8a30db8729a86628073910e56f85aaf8a659e053f376a2e6ea5a8/tzlocal-5.4.5-py3-none-any.whl ecab534f6d65d9deb4c4ea52c121ab6dd5958e9b878e71dcb102578269752454"
  "$PYPI/38/0c/b54a4fdd7f90a3af8b02ebc9ce6712c2c208b7926a2f7bad95c33ebbe943/uvicorn-0.54.0-py3-none-any.whl 505bdb0f318731d45f1f712071fc781a8981f6847a31c902c9f5e652d4f67faf"
)
unpack_pinned "$OUT/mcp-servers-python" "${WHEELS[@]}"

key=$(hash_inputs "$SRC/package.json" "$SRC/package-lock.json")
[[ $(cat "$DEST/.key" 2>/dev/null) == "$key" ]] && exit 0
rm -rf "$DEST.tmp"; mkdir -p "$DEST.tmp"
cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST.tmp/"
# --ignore-scripts: no package runs code at install time.
(cd "$DEST.tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) \
  || die "npm ci in $DEST.tmp failed"
echo "$key" > "$DEST.tmp/.key"
rm -rf "$DEST"; mv "$DEST.tmp" "$DEST"
log "MCP test servers in $DEST: $(node -p "require('$DEST/node_modules/@modelcontextprotocol/server-everything/package.json').version" ) (server-everything)"
