# On the quiet machine, from the repository root: install the kit's wheels into /tmp/site, sshd (with the
# carried libraries only where the machine lacks them, through a wrapper that sets LD_LIBRARY_PATH), mtail.
set -e
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .devkit/whl/*.whl
mkdir -p /opt/devkit/lib /opt/devkit/bin
for l in .devkit/lib/*; do ldconfig -p | grep -q "$(basename "$l") " || cp "$l" /opt/devkit/lib/; done
echo "devkit libs carried: $(ls /opt/devkit/lib | tr '\n' ' ')"
cp .devkit/bin/mtail /usr/bin/mtail
for b in sshd ssh-keygen ssh; do
  dest=/usr/bin/$b; [ "$b" = sshd ] && dest=/usr/sbin/sshd
  if [ -z "$(ls /opt/devkit/lib)" ]; then cp ".devkit/bin/$b" "$dest"; else
    cp ".devkit/bin/$b" "/opt/devkit/bin/$b"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=/opt/devkit/lib exec /opt/devkit/bin/%s "$@"\n' "$b" > "$dest"; chmod +x "$dest"; fi
done
getent passwd sshd >/dev/null || useradd -r -M -d /run/sshd -s /usr/sbin/nologin sshd
mkdir -p /run/sshd /var/empty
