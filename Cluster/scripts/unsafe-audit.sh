#!/usr/bin/env bash
# Keeps unsafe code in the bottom layers. Lists every line of Sources/ that
# uses an unsafe construct (raw pointers, Unmanaged, unchecked casts, unsafe
# unowned references, private runtime entry points) outside the bottom files
# below, says why each one is allowed, and exits 1 if one has no reason in the
# per-line list. Comment lines are not counted.
#
#   Cluster/scripts/unsafe-audit.sh          # from the repository root
set -euo pipefail
cd "$(dirname "$0")/../.."

pattern='Unsafe|Unmanaged|unsafeDowncast|unsafeBitCast|withUnsafe|unowned\(unsafe\)|_unsafe|@_silgen_name'

# Files where unsafe code belongs: each owns memory or a foreign interface
# that cannot be expressed safely, behind a safe API for the layers above.
allowed_files=(
  # The runtime's event loops: libuv handles, their callbacks and contexts.
  Sources/OscarRuntime/EventLoop.swift
  Sources/OscarRuntime/UVHandle.swift
  Sources/OscarRuntime/LoopExecutors.swift
  # A message lent to its reaction with its type erased, read back only as
  # the type it was lent as.
  Sources/OscarRuntime/ErasedMessage.swift
  # Process primitives a node runner needs: environ, file reads, a thread
  # of its own for the parent-death signal, one write(2) to standard error.
  Sources/OscarRuntime/ProcessControl.swift
  # The transport: sockets, frames, read buffers, addresses, name lookup.
  Sources/OscarRemote/Connection.swift
  Sources/OscarRemote/FrameBuffer.swift
  Sources/OscarRemote/Transport.swift
  Sources/OscarRemote/WireEnvelope.swift
  Sources/OscarRemote/LargeMessageLane.swift
  Sources/OscarRemote/Reassembly.swift
  Sources/OscarRemote/Association.swift
  Sources/OscarRemote/SocketAddress.swift
  Sources/OscarRemote/HostResolver.swift
  # The bulk lane's sockets, read and written with blocking calls.
  Sources/OscarRemote/BulkSocket.swift
  # The bulk lane's copying thread: raw buffers handed over between threads.
  Sources/OscarRemote/BulkCopier.swift
  # The byte-stream server and connections the management endpoint's HTTP
  # runs on: libuv TCP handles, read buffers and write requests.
  Sources/OscarRemote/StreamServer.swift
  Sources/OscarRemote/StreamConnection.swift
  # TLS through OpenSSL (COpenSSL): its objects, memory BIOs, the buffers
  # records are decrypted into, and the certificate files it reads and
  # writes. Nothing above these files sees an OpenSSL type.
  Sources/OscarRemote/TLSSession.swift
  Sources/OscarRemote/TLSCredentials.swift
  Sources/OscarRemote/X509Certificate.swift
  Sources/OscarRemote/CertificateAuthority.swift
  Sources/OscarRemote/CertificateDirectory.swift
  # The CBOR codec's reader, decoder and writer over byte buffers, and
  # where borrowed spans meet them.
  Sources/OscarCBOR/CBORReader.swift
  Sources/OscarCBOR/CBORDecoder.swift
  Sources/OscarCBOR/CBORWriter.swift
  Sources/OscarCBOR/CBORValue.swift
  Sources/OscarCBOR/MapKey.swift
  Sources/OscarCBOR/UTF8Equality.swift
  Sources/OscarCBOR/BorrowedBytes.swift
  # A reassembled message's buffer, which a large decoded Data keeps
  # instead of copying.
  Sources/OscarCBOR/LendableBuffer.swift
  # The direct call path for distributed actors: Swift runtime internals,
  # used only once a start-up check has passed (ClusterSystem.Settings.fastCallPath).
  Sources/OscarDistributed/TargetExecution.swift
  Sources/OscarDistributed/CallableFunctions.swift
  # The CLI (not the library): fork/exec, file descriptors, getaddrinfo.
  Sources/oscar/LocalProcesses.swift
  Sources/oscar/FileStream.swift
  Sources/oscar/NodeSupervisor.swift
  Sources/oscar/ClusterSecret.swift
  Sources/oscar/BlockingSocket.swift
  Sources/oscar/RawTCPBenchmark.swift
)

# Lines elsewhere, each justified: file|text on the line|why.
justified=(
  'Sources/OscarRuntime/PendingAsk.swift|UnsafeContinuation<|an ask resumes exactly once (its completed flag decides races); the checked kind allocates per ask'
  'Sources/OscarRuntime/ActorRef.swift|withUnsafeThrowingContinuation { (continuation: PendingAsk<M.Reply>|the continuation is a PendingAsk, which resumes exactly once'
  'Sources/OscarRuntime/ActorRef.swift|withUnsafeThrowingContinuation { (continuation: PendingAsk<CBORValue>|the continuation is a PendingAsk, which resumes exactly once'
  'Sources/OscarBase/OscarLog.swift|bytes.withUnsafeMutableBytes { Glibc.write(2|one write(2) per log line, so lines from several threads do not interleave'
)

is_allowed_file() {
  local file=$1 f
  for f in "${allowed_files[@]}"; do [[ $file == "$f" ]] && return 0; done
  return 1
}

reason_for() {
  local file=$1 line=$2 entry
  for entry in "${justified[@]}"; do
    IFS='|' read -r jfile jtext jwhy <<<"$entry"
    if [[ $file == "$jfile" && $line == *"$jtext"* ]]; then
      printf '%s' "$jwhy"
      return 0
    fi
  done
  return 1
}

unjustified=0
outside=0
declare -A used=()
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  number=${rest%%:*}
  line=${rest#*:}
  trimmed=${line#"${line%%[![:space:]]*}"}
  [[ $trimmed == //* ]] && continue
  is_allowed_file "$file" && continue
  outside=$((outside + 1))
  if why=$(reason_for "$file" "$line"); then
    used["$file|$why"]=1
    printf '%s:%s: %s\n    justified: %s\n' "$file" "$number" "$trimmed" "$why"
  else
    unjustified=$((unjustified + 1))
    printf '%s:%s: %s\n    NOT JUSTIFIED: move it into a bottom file or add a reason to %s\n' \
      "$file" "$number" "$trimmed" "$0"
  fi
done < <(grep -rnE "$pattern" Sources --include='*.swift' | sort -t: -k1,1 -k2,2n)

for entry in "${justified[@]}"; do
  IFS='|' read -r jfile _ jwhy <<<"$entry"
  [[ -n ${used["$jfile|$jwhy"]:-} ]] || echo "note: a justification matches no line any more: $entry"
done

echo "unsafe-audit: ${#allowed_files[@]} bottom files; $outside line(s) outside them, $unjustified not justified"
[[ $unjustified -eq 0 ]]
