{{/*
Names and labels of the gharc-controller chart. They are ARC's gha-runner-scale-set-controller
chart's: the base name "gha-rs-controller" (objects "<release>-gha-rs-controller", the same
service account name, app.kubernetes.io/name), the same selector labels (so `helm upgrade`
of an ARC release to this chart keeps its Deployment), and ARC's discovery labels
(app.kubernetes.io/part-of: gha-rs-controller and actions.github.com/controller-*), so scale
set values that pin controllerServiceAccount.name keep binding an account that exists.
*/}}

{{- define "gharc-controller.baseName" -}}gha-rs-controller{{- end }}

{{- define "gharc-controller.name" -}}
{{- default (include "gharc-controller.baseName" .) .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gharc-controller.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "gharc-controller.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default (include "gharc-controller.baseName" .) .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gharc-controller.chart" -}}
{{- printf "%s-%s" (include "gharc-controller.baseName" .) .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gharc-controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gharc-controller.name" . }}
app.kubernetes.io/namespace: {{ include "gharc-controller.namespace" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gharc-controller.labels" -}}
helm.sh/chart: {{ include "gharc-controller.chart" . }}
{{ include "gharc-controller.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: gha-rs-controller
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- range $k, $v := .Values.labels }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end }}

{{/*
The controller image. ARC's images hold ARC's Go binaries, not `gharc`: a values file copied
from ARC (users pass the whole file) would start a controller that cannot run and hand the
same image to every listener. Refuse it, saying what to set.
*/}}
{{- define "gharc-controller.image" -}}
{{- $repo := toString .Values.image.repository }}
{{- if regexMatch "(^|/)(gha-runner-scale-set-controller|actions-runner-controller)$" $repo }}
{{- fail (printf "image.repository %q is ARC's controller image, which cannot run gharc (command: gharc controller); remove image.repository (and image.tag) from your values to use gharc's image ghcr.io/gharc/gharc, or set image.repository to a gharc image" $repo) }}
{{- end }}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
Values of ARC's controller charts that gharc cannot honour: refused with a message rather
than silently ignored.
*/}}
{{- define "gharc-controller.refuseUnsupported" -}}
{{- if hasKey .Values "controller" }}
{{- fail "controller.* is the layout of ARC's experimental controller chart; this chart takes ARC's gha-runner-scale-set-controller layout (image, flags, metrics, serviceAccount, ... at the top level): move the settings there and remove controller" }}
{{- end }}
{{- with (default dict .Values.pprof).addr }}
{{- fail (printf "pprof.addr %q: gharc has no Go profiler endpoint; remove pprof.addr (docs/configuration.md)" (toString .)) }}
{{- end }}
{{- with ((default dict .Values.flags).rateLimiter | default dict).name }}
{{- if ne . "bucket_rate_limiter" }}
{{- fail (printf "flags.rateLimiter.name %q is not supported: gharc's work queues always combine per-item backoff with an overall token bucket (ARC's bucket_rate_limiter); remove flags.rateLimiter" .) }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gharc-controller.serviceAccountName" -}}
{{- if eq .Values.serviceAccount.name "default" }}
{{- fail "serviceAccount.name cannot be set to 'default': the controller needs its own service account for its RBAC bindings" }}
{{- end }}
{{- if .Values.serviceAccount.create }}
{{- default (include "gharc-controller.fullname" .) .Values.serviceAccount.name }}
{{- else if .Values.serviceAccount.name }}
{{- .Values.serviceAccount.name }}
{{- else }}
{{- fail "serviceAccount.name must be set if serviceAccount.create is false (the name of an existing service account)" }}
{{- end }}
{{- end }}

{{/* Leader election is on exactly when more than one replica runs. */}}
{{- define "gharc-controller.leaderElection" -}}
{{- if or (gt (int (default 1 .Values.replicaCount)) 1) (include "gharc-controller.sharded" .) }}true{{ end }}
{{- end }}

{{/* flags.shards > 1: the replicas share the scale sets out over shard Leases. */}}
{{- define "gharc-controller.sharded" -}}
{{- if gt (int (default 1 .Values.flags.shards)) 1 }}true{{ end }}
{{- end }}

{{/* "0" and "" both mean "off" for a bind address, as in ARC. */}}
{{- define "gharc-controller.addrEnabled" -}}
{{- if and . (ne (toString .) "0") }}true{{ end }}
{{- end }}

{{- define "gharc-controller.port" -}}
{{- $port := regexFind "[0-9]+$" (toString .addr) }}
{{- if not $port }}
{{- fail (printf "%s must end with a numeric port, got %q" .name (toString .addr)) }}
{{- end }}
{{- $port }}
{{- end }}
