{{/*
The runner pod template of the AutoscalingRunnerSet: .Values.template with the container
mode and githubServerTLS applied (spec §11.2). Built as data rather than text: the
template is deep-copied, the "runner" container gets what the mode needs unless the user
already set it (an env var or mount of the same name, a volume of the same name), and the
result is printed with toYaml. The controller adds nothing mode-specific later.
*/}}

{{/* Append env var .e to container .c unless one with that name exists. */}}
{{- define "gharc-scale-set.addEnv" -}}
{{- $env := default list .c.env }}
{{- $found := false }}
{{- range $env }}{{ if eq .name $.e.name }}{{ $found = true }}{{ end }}{{ end }}
{{- if not $found }}{{ $_ := set .c "env" (append $env .e) }}{{ end }}
{{- end }}

{{/* Append volume mount .m to container .c unless one with that name exists. */}}
{{- define "gharc-scale-set.addMount" -}}
{{- $mounts := default list .c.volumeMounts }}
{{- $found := false }}
{{- range $mounts }}{{ if eq .name $.m.name }}{{ $found = true }}{{ end }}{{ end }}
{{- if not $found }}{{ $_ := set .c "volumeMounts" (append $mounts .m) }}{{ end }}
{{- end }}

{{/* Append volume .v to pod spec .s unless one with that name exists. */}}
{{- define "gharc-scale-set.addVolume" -}}
{{- $volumes := default list .s.volumes }}
{{- $found := false }}
{{- range $volumes }}{{ if eq .name $.v.name }}{{ $found = true }}{{ end }}{{ end }}
{{- if not $found }}{{ $_ := set .s "volumes" (append $volumes .v) }}{{ end }}
{{- end }}

{{- define "gharc-scale-set.podTemplate" -}}
{{- $mode := include "gharc-scale-set.mode" . }}
{{- $tpl := deepCopy (default dict .Values.template) }}
{{- $spec := default dict $tpl.spec }}
{{- $containers := default list $spec.containers }}
{{- $runner := dict }}
{{- range $containers }}{{ if eq .name "runner" }}{{ $runner = . }}{{ end }}{{ end }}
{{- if not $runner.name }}
{{- fail "template.spec.containers must contain a container named \"runner\" (the GitHub Actions runner)" }}
{{- end }}
{{- if not $runner.image }}
{{- fail "template.spec.containers[name=runner].image is required" }}
{{- end }}
{{- if not $spec.restartPolicy }}{{ $_ := set $spec "restartPolicy" "Never" }}{{ end }}
{{- if not $spec.serviceAccountName }}
{{- $_ := set $spec "serviceAccountName" (ternary (include "gharc-scale-set.kubeModeName" .) (include "gharc-scale-set.noPermissionName" .) (eq (include "gharc-scale-set.kubeMode" .) "true")) }}
{{- end }}

{{- /* githubServerTLS: the CA bundle in the runner, for every mode. */}}
{{- $tls := default dict .Values.githubServerTLS }}
{{- if $tls.runnerMountPath }}
{{- $ref := (default dict $tls.certificateFrom).configMapKeyRef | default dict }}
{{- $path := clean (printf "%s/%s" $tls.runnerMountPath $ref.key) }}
{{- $_ := include "gharc-scale-set.addEnv" (dict "c" $runner "e" (dict "name" "NODE_EXTRA_CA_CERTS" "value" $path)) }}
{{- $_ := include "gharc-scale-set.addEnv" (dict "c" $runner "e" (dict "name" "RUNNER_UPDATE_CA_CERTS" "value" "1")) }}
{{- $_ := include "gharc-scale-set.addMount" (dict "c" $runner "m" (dict "name" "github-server-tls-cert" "mountPath" $path "subPath" $ref.key)) }}
{{- $_ := include "gharc-scale-set.addVolume" (dict "s" $spec "v" (dict "name" "github-server-tls-cert" "configMap" (dict "name" $ref.name "items" (list (dict "key" $ref.key "path" $ref.key))))) }}
{{- end }}

{{- if eq $mode "dind" }}
{{- $_ := include "gharc-scale-set.addEnv" (dict "c" $runner "e" (dict "name" "DOCKER_HOST" "value" "unix:///var/run/docker.sock")) }}
{{- $_ := include "gharc-scale-set.addEnv" (dict "c" $runner "e" (dict "name" "RUNNER_WAIT_FOR_DOCKER_IN_SECONDS" "value" "120")) }}
{{- $_ := include "gharc-scale-set.addMount" (dict "c" $runner "m" (dict "name" "work" "mountPath" "/home/runner/_work")) }}
{{- $_ := include "gharc-scale-set.addMount" (dict "c" $runner "m" (dict "name" "dind-sock" "mountPath" "/var/run")) }}
{{- $initExternals := dict "name" "init-dind-externals" "image" $runner.image "command" (list "cp") "args" (list "-r" "/home/runner/externals/." "/home/runner/tmpDir/") "volumeMounts" (list (dict "name" "dind-externals" "mountPath" "/home/runner/tmpDir")) }}
{{- $dind := dict "name" "dind" "image" "docker:dind" "args" (list "dockerd" "--host=unix:///var/run/docker.sock" "--group=$(DOCKER_GROUP_GID)") "env" (list (dict "name" "DOCKER_GROUP_GID" "value" "123")) "securityContext" (dict "privileged" true) "volumeMounts" (list (dict "name" "work" "mountPath" "/home/runner/_work") (dict "name" "dind-sock" "mountPath" "/var/run") (dict "name" "dind-externals" "mountPath" "/home/runner/externals")) }}
{{- $others := list }}
{{- range $containers }}{{ if not (has .name (list "runner" "dind")) }}{{ $others = append $others . }}{{ end }}{{ end }}
{{- $inits := list $initExternals }}
{{- if semverCompare ">=1.29-0" .Capabilities.KubeVersion.Version }}
{{- /* Native sidecar: started before the runner, stopped after it. */}}
{{- $_ := set $dind "restartPolicy" "Always" }}
{{- $_ := set $dind "startupProbe" (dict "exec" (dict "command" (list "docker" "info")) "initialDelaySeconds" 0 "failureThreshold" 24 "periodSeconds" 5) }}
{{- $inits = append $inits $dind }}
{{- $containers = concat (list $runner) $others }}
{{- else }}
{{- $containers = concat (list $runner $dind) $others }}
{{- end }}
{{- $_ := set $spec "initContainers" (concat $inits (default list $spec.initContainers)) }}
{{- $_ := set $spec "containers" $containers }}
{{- $_ := include "gharc-scale-set.addVolume" (dict "s" $spec "v" (dict "name" "dind-sock" "emptyDir" dict)) }}
{{- $_ := include "gharc-scale-set.addVolume" (dict "s" $spec "v" (dict "name" "dind-externals" "emptyDir" dict)) }}
{{- $_ := include "gharc-scale-set.addVolume" (dict "s" $spec "v" (dict "name" "work" "emptyDir" dict)) }}
{{- end }}

{{- if has $mode (list "kubernetes" "kubernetes-novolume") }}
{{- $hooks := ternary "/home/runner/k8s/index.js" "/home/runner/k8s-novolume/index.js" (eq $mode "kubernetes") }}
{{- $_ := include "gharc-scale-set.addEnv" (dict "c" $runner "e" (dict "name" "ACTIONS_RUNNER_CONTAINER_HOOKS" "value" $hooks)) }}
{{- $_ := include "gharc-scale-set.addEnv" (dict "c" $runner "e" (dict "name" "ACTIONS_RUNNER_POD_NAME" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name")))) }}
{{- $_ := include "gharc-scale-set.addEnv" (dict "c" $runner "e" (dict "name" "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER" "value" "true")) }}
{{- if eq $mode "kubernetes" }}
{{- $claim := (default dict .Values.containerMode).kubernetesModeWorkVolumeClaim }}
{{- $userWork := false }}
{{- range (default list $spec.volumes) }}{{ if eq .name "work" }}{{ $userWork = true }}{{ end }}{{ end }}
{{- if and (not $claim) (not $userWork) }}
{{- fail "containerMode.kubernetesModeWorkVolumeClaim is required when containerMode.type is kubernetes (the PVC spec of each runner's work volume, e.g. {accessModes: [ReadWriteOnce], storageClassName: standard, resources: {requests: {storage: 1Gi}}}), unless template.spec.volumes has a volume named work" }}
{{- end }}
{{- $_ := include "gharc-scale-set.addMount" (dict "c" $runner "m" (dict "name" "work" "mountPath" "/home/runner/_work")) }}
{{- $_ := include "gharc-scale-set.addVolume" (dict "s" $spec "v" (dict "name" "work" "ephemeral" (dict "volumeClaimTemplate" (dict "spec" $claim)))) }}
{{- else }}
{{- $_ := include "gharc-scale-set.addEnv" (dict "c" $runner "e" (dict "name" "ACTIONS_RUNNER_IMAGE" "value" $runner.image)) }}
{{- /* No work volume: empty lists rather than absent ones, as ARC's chart renders them. */}}
{{- if not $spec.volumes }}{{ $_ := set $spec "volumes" list }}{{ end }}
{{- if not $runner.volumeMounts }}{{ $_ := set $runner "volumeMounts" list }}{{ end }}
{{- end }}
{{- end }}
{{- /* Volumes in ARC's order: the TLS bundle, the mode's volumes, then the user's others. */}}
{{- if $spec.volumes }}
{{- $first := list "github-server-tls-cert" }}
{{- if eq $mode "dind" }}{{ $first = concat $first (list "dind-sock" "dind-externals" "work") }}{{ end }}
{{- if eq $mode "kubernetes" }}{{ $first = append $first "work" }}{{ end }}
{{- $ordered := list }}
{{- range $n := $first }}{{ range $spec.volumes }}{{ if eq .name $n }}{{ $ordered = append $ordered . }}{{ end }}{{ end }}{{ end }}
{{- range $spec.volumes }}{{ if not (has .name $first) }}{{ $ordered = append $ordered . }}{{ end }}{{ end }}
{{- $_ := set $spec "volumes" $ordered }}
{{- end }}
{{- $_ := set $tpl "spec" $spec }}
{{- toYaml $tpl }}
{{- end }}
